import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";

/**
 * Starts the worker thread whose entry point is `name` (without extension) in the folder of
 * `from` (a module's `import.meta.url`; default this folder): the
 * built `.js` file, or under tsx or vitest the TypeScript source through tsx (Node 20 does not
 * apply a worker's `--import tsx` hooks to its entry point, so a small bootstrap registers
 * tsx's ESM hooks and then imports the source).
 */
export function startModuleWorker(name: string, workerData: unknown, from: string = import.meta.url): Worker {
  if (!from.endsWith(".ts")) return new Worker(new URL(`./${name}.js`, from), { workerData });
  const entry = new URL(`./${name}.ts`, from).href;
  const bootstrap = `import(${JSON.stringify(tsxEsmApi())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData, execArgv: [] });
}

/** The file URL of tsx's `tsx/esm/api` (ESM build), from its package's exports. */
function tsxEsmApi(): string {
  const pkgFile = createRequire(import.meta.url).resolve("tsx/package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8")) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(pkgFile), pkg.exports["./esm/api"]!.import.default)).href;
}
