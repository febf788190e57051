// The pieces the server benchmarks share: which models to run on, and `tessera serve` in a
// process of its own with the default catalog pointed at one model directory. Not a benchmark
// itself (run.ts skips files starting with "_").
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");

export const MODEL_DIRS: Record<string, string> = {
  tiny: join(root, "test/fixtures/tiny-model"),
  bundled: join(root, "models/tessera-bd-small"),
};

/** The models this run uses: BENCH_MODELS, or the tiny model and the bundled one if it is there. */
export function benchModels(): [string, string][] {
  const asked = (process.env["BENCH_MODELS"] ?? "tiny,bundled").split(",").map((s) => s.trim());
  return asked.filter((name) => MODEL_DIRS[name] !== undefined && existsSync(MODEL_DIRS[name])).map((name) => [name, MODEL_DIRS[name]!]);
}

export interface BenchServer {
  url: string;
  key: string;
  child: ChildProcess;
  logFile: string;
  /** The server's data directory (the embedded store). */
  dataDir: string;
  /** Resident memory of the server process, from its /metrics. */
  rss(): Promise<number>;
  /** Model forward passes so far (every model and phase), from its /metrics. */
  forwards(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `tessera serve` on a free port with the default catalog pointed at `modelDir`: from the
 * TypeScript sources through tsx, or from the build in dist/ (`npm run build`).
 */
export async function startBenchServer(
  modelDir: string,
  env: Record<string, string> = {},
  from: "sources" | "build" = "sources",
): Promise<BenchServer> {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-bench-"));
  const catalog = JSON.parse(readFileSync(join(root, "models.config.json"), "utf8")) as { models: { model_dir: string }[] };
  for (const model of catalog.models) model.model_dir = modelDir;
  writeFileSync(join(scratch, "models.config.json"), JSON.stringify(catalog));
  const key = `tsr_${randomBytes(32).toString("base64url")}`;
  const logFile = join(scratch, "tessera.log");
  const entry = from === "build" ? ["dist/bin/tessera.js"] : ["--import", "tsx", "bin/tessera.ts"];
  const child = spawn(process.execPath, [...entry, "serve"], {
    cwd: root,
    env: {
      ...process.env,
      TESSERA_PORT: "0",
      TESSERA_DATA_DIR: join(scratch, "data"),
      TESSERA_MODELS_CONFIG: join(scratch, "models.config.json"),
      TESSERA_BOOTSTRAP_KEY: key,
      // The limiter counts every request but never refuses in a benchmark.
      TESSERA_DEFAULT_RPM: "1000000000",
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", openSync(logFile, "w"), "inherit"],
  });
  let url = "";
  for (let i = 0; i < 1200 && url === ""; i++) {
    if (child.exitCode !== null) throw new Error(`tessera exited with ${child.exitCode}:\n${readFileSync(logFile, "utf8")}`);
    const line = readFileSync(logFile, "utf8")
      .split("\n")
      .find((l) => l.includes('"tessera listening"'));
    if (line !== undefined) url = (JSON.parse(line) as { url: string }).url;
    else await new Promise((r) => setTimeout(r, 100));
  }
  if (url === "") throw new Error(`tessera did not start:\n${readFileSync(logFile, "utf8")}`);
  return {
    url,
    key,
    child,
    logFile,
    dataDir: join(scratch, "data"),
    async rss() {
      const text = await (await fetch(`${url}/metrics`)).text();
      return Number(/^tessera_process_resident_memory_bytes (\S+)$/m.exec(text)?.[1] ?? NaN);
    },
    async forwards() {
      const text = await (await fetch(`${url}/metrics`)).text();
      return [...text.matchAll(/^tessera_forward_passes_total\{[^}]*\} (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    },
    stop: () =>
      new Promise<void>((done) => {
        const finish = () => {
          rmSync(scratch, { recursive: true, force: true });
          done();
        };
        if (child.exitCode !== null) return finish();
        child.once("exit", finish);
        child.kill("SIGTERM");
      }),
  };
}

/** Runs one benchmark on each model of this run; the process fails if any run did. */
export async function runOnEachModel(runModel: (name: string, dir: string) => Promise<boolean>): Promise<void> {
  let ok = true;
  for (const [name, dir] of benchModels()) ok = (await runModel(name, dir)) && ok;
  if (!ok) process.exitCode = 1;
}
