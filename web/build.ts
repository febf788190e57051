import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { packageRoot, playgroundDir } from "../lib/package-root.js";

/** The files of the built page, by the name the gateway serves them under. */
export const PLAYGROUND_FILES = ["index.html", "app.js", "app.css", "favicon.svg"] as const;

/**
 * Builds the playground (web/) into `outDir` (default dist/playground): the TypeScript of
 * web/src and the stylesheets of web/styles, each bundled by esbuild into one file (app.js,
 * app.css) for current Chromium and Firefox, beside the page and its icon. Each file is written aside and renamed into place, so a
 * server (or a concurrent build) never reads half a file.
 */
export async function buildPlayground(outDir = playgroundDir(import.meta.dirname)): Promise<string> {
  const web = join(packageRoot(import.meta.dirname), "web");
  const bundle = async (entry: string, outfile: string) => {
    const result = await build({
      entryPoints: [join(web, entry)],
      bundle: true,
      format: "esm",
      target: ["chrome120", "firefox120"],
      minify: true,
      sourcemap: false,
      write: false,
      legalComments: "none",
      logLevel: "silent",
      // The page's own files, served by the gateway (gateway/routes/playground.ts).
      external: ["/playground/*"],
      outfile,
    });
    return result.outputFiles[0]!.contents;
  };
  const files: Record<string, string | Uint8Array> = {
    "index.html": readFileSync(join(web, "index.html"), "utf8"),
    "app.js": await bundle("src/main.ts", "app.js"),
    "app.css": await bundle("styles/index.css", "app.css"),
    "favicon.svg": readFileSync(join(web, "favicon.svg"), "utf8"),
  };
  mkdirSync(outDir, { recursive: true });
  for (const [name, content] of Object.entries(files)) {
    const aside = join(outDir, `.${name}.${process.pid}.${Date.now()}`);
    writeFileSync(aside, content);
    renameSync(aside, join(outDir, name));
  }
  return outDir;
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const dir = await buildPlayground();
  console.log(`playground built into ${dir}`);
}
