import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { packageRoot, playgroundDir } from "../lib/package-root.js";

/** The files of the built page, by the name the gateway serves them under. */
export const PLAYGROUND_FILES = ["index.html", "app.js", "app.css", "favicon.svg"] as const;

/**
 * Builds the playground (web/) into `outDir` (default dist/playground): the TypeScript of
 * web/src bundled by esbuild into one app.js for current Chromium and Firefox, beside the
 * page, its stylesheet and icon. Each file is written aside and renamed into place, so a
 * server (or a concurrent build) never reads half a file.
 */
export async function buildPlayground(outDir = playgroundDir(import.meta.dirname)): Promise<string> {
  const web = join(packageRoot(import.meta.dirname), "web");
  const bundled = await build({
    entryPoints: [join(web, "src/main.ts")],
    bundle: true,
    format: "esm",
    target: ["chrome120", "firefox120"],
    minify: true,
    sourcemap: false,
    write: false,
    legalComments: "none",
    logLevel: "silent",
    outfile: "app.js",
  });
  const files: Record<string, string | Uint8Array> = {
    "index.html": readFileSync(join(web, "index.html"), "utf8"),
    "app.js": bundled.outputFiles[0]!.contents,
    "app.css": readFileSync(join(web, "styles.css"), "utf8"),
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
