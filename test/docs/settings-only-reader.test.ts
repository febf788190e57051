import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

// The settings table (lib/config-settings/, read by lib/config.ts) is the only reader of the
// server's TESSERA_ variables: a setting read anywhere else would have no entry, no check at
// start, no line in --help or docs/configuration.md. Tests and their shared code may read
// variables of their own (TESSERA_TEST_*, TESSERA_CHROMIUM…); benchmarks use BENCH_*.

const root = path.resolve(import.meta.dirname, "../..");

/** The folders of the project's TypeScript and JavaScript (not node_modules, dist, training). */
const SOURCE_ROOTS = ["bin", "gen", "gateway", "services", "lib", "bench", "web", "scripts", "test"];
const SOURCE = /\.(ts|tsx|mts|cts|js|mjs|cjs)$/;

/** Where reading TESSERA_ variables is allowed: the table and its loader, tests and their helpers. */
function allowed(file: string): boolean {
  return (
    file.startsWith("lib/config-settings/") || file === "lib/config.ts" || /\.test\.[cm]?[jt]sx?$/.test(file) || file.startsWith("test/")
  );
}

/** Reads of a TESSERA_ variable in source text: `env.TESSERA_X`, `env["TESSERA_X"]`, `const { TESSERA_X } = process.env`. */
function tesseraReads(text: string): string[] {
  const reads = [...text.matchAll(/\benv\s*(?:\?\.\s*|\.\s*|(?:\?\.)?\[\s*["'`])(TESSERA_\w+)/g)].map((m) => m[1]!);
  for (const m of text.matchAll(/\{([^{}]*)\}\s*=\s*(?:process\.)?env\b/g)) {
    reads.push(...(m[1]!.match(/\bTESSERA_\w+/g) ?? []));
  }
  return reads;
}

function sources(): string[] {
  return SOURCE_ROOTS.flatMap((dir) =>
    readdirSync(path.join(root, dir), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && SOURCE.test(e.name) && !e.parentPath.includes("node_modules"))
      .map((e) => path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join("/")),
  );
}

describe("the settings table is the only reader of TESSERA_ variables", () => {
  it("finds the reads it must find, and not the writes of a child's environment", () => {
    expect(tesseraReads("const a = process.env.TESSERA_SLOTS;")).toEqual(["TESSERA_SLOTS"]);
    expect(tesseraReads('const a = env["TESSERA_QUEUE"] ?? "1";')).toEqual(["TESSERA_QUEUE"]);
    expect(tesseraReads("const v = env?.TESSERA_ORT_WORKER?.trim();")).toEqual(["TESSERA_ORT_WORKER"]);
    expect(tesseraReads("const { TESSERA_PORT: port, HOME } = process.env;")).toEqual(["TESSERA_PORT"]);
    expect(tesseraReads('spawn(cmd, { env: { ...process.env, TESSERA_PORT: "0" } });')).toEqual([]);
    expect(tesseraReads("throw new Error(`set TESSERA_ADMIN_TOKEN`);")).toEqual([]);
  });

  it("has no reader outside lib/config-settings/ and lib/config.ts (tests aside)", () => {
    const files = sources();
    expect(files.length).toBeGreaterThan(300);
    const found = files
      .filter((file) => !allowed(file))
      .flatMap((file) => tesseraReads(readFileSync(path.join(root, file), "utf8")).map((name) => `${file}: ${name}`));
    expect(found).toEqual([]);
  });
});
