import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { type Transferable, Worker } from "node:worker_threads";

/**
 * Starts the worker thread whose entry point is `name` (without extension) in the folder of
 * `from` (the calling module's `import.meta.url`): the built `.js` file, or under tsx or
 * vitest the TypeScript source through tsx-worker-bootstrap.mjs. `transferList` moves what
 * `workerData` holds that must be transferred (a MessagePort).
 */
export function startModuleWorker(name: string, from: string, workerData?: unknown, transferList?: readonly Transferable[]): Worker {
  const transfer = transferList === undefined ? {} : { transferList: [...transferList] };
  if (!from.endsWith(".ts")) return new Worker(new URL(`./${name}.js`, from), { workerData, ...transfer });
  const entry = new URL(`./${name}.ts`, from).href;
  return new Worker(new URL("./tsx-worker-bootstrap.mjs", import.meta.url), {
    argv: [tsxEsmApi(), entry],
    workerData,
    execArgv: [],
    ...transfer,
  });
}

/** The file URL of tsx's `tsx/esm/api` (ESM build), from its package's exports. */
function tsxEsmApi(): string {
  const pkgFile = createRequire(import.meta.url).resolve("tsx/package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8")) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(pkgFile), pkg.exports["./esm/api"]!.import.default)).href;
}
