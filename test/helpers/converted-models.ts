import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ModelRuntime } from "../../services/inference/engine/runtime.js";
import { REPO_ROOT } from "./tessera.js";

/** The converter's Python environment, as `.ci/run` creates it. */
export const CONVERT_PYTHON = join(REPO_ROOT, "convert/.venv/bin/python");
export const HAVE_CONVERT_VENV = existsSync(CONVERT_PYTHON);
export const NO_VENV_MESSAGE =
  "convert/.venv is missing: the converter's tests are skipped. Create it with " +
  "`python3 -m venv convert/.venv && convert/.venv/bin/pip install -r convert/requirements.txt` (.ci/run does).";

export interface ConvertedFixtures {
  checkpoints: { sdar: string; fastDllm: string; qwen3: string; qwen2: string };
  models: { sdar: string; sdarFp16: string; sdarInt8: string; sdarInt4: string; fastDllm: string; qwen3: string; qwen2: string };
}

/** Runs a Python file or module of convert/ with the venv; rejects with its stderr on failure. */
export function runConvertPython(args: string[], timeoutMs = 300_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(CONVERT_PYTHON, args, {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        PYTHONPATH: [join(REPO_ROOT, "convert"), process.env.PYTHONPATH].filter((p) => p !== undefined && p !== "").join(":"),
        OMP_NUM_THREADS: "1",
      },
      timeout: timeoutMs,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`${args.join(" ")} exited ${code}:\n${stderr}`)),
    );
  });
}

/** `tessera convert` through the real command line (bin/tessera.ts). */
export function tesseraConvert(
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", "convert", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, OMP_NUM_THREADS: "1", ...env },
    encoding: "utf8",
    timeout: 300_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function sourcesHash(): string {
  const h = createHash("sha256");
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      if (name === ".venv" || name === "__pycache__") continue;
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else h.update(p).update(readFileSync(p));
    }
  };
  walk(join(REPO_ROOT, "convert"));
  return h.digest("hex").slice(0, 16);
}

/**
 * The tiny checkpoints of both families and their conversions, built once per version of
 * convert/ into .cache/convert-fixtures/<hash> (test files share them; a directory appears
 * only complete, by rename).
 */
export async function convertedFixtures(): Promise<ConvertedFixtures> {
  const root = join(REPO_ROOT, ".cache/convert-fixtures", sourcesHash());
  const layout: ConvertedFixtures = {
    checkpoints: {
      sdar: join(root, "ckpt/sdar"),
      fastDllm: join(root, "ckpt/fast_dllm_v2"),
      qwen3: join(root, "ckpt/qwen3"),
      qwen2: join(root, "ckpt/qwen2"),
    },
    models: {
      sdar: join(root, "sdar"),
      sdarFp16: join(root, "sdar-fp16"),
      sdarInt8: join(root, "sdar-int8"),
      sdarInt4: join(root, "sdar-int4"),
      fastDllm: join(root, "fast_dllm_v2"),
      qwen3: join(root, "qwen3"),
      qwen2: join(root, "qwen2"),
    },
  };
  if (existsSync(join(root, "complete"))) return layout;
  // One test file builds; the others (vitest runs files in parallel) wait for it.
  const lock = `${root}.lock`;
  try {
    mkdirSync(join(REPO_ROOT, ".cache/convert-fixtures"), { recursive: true });
    mkdirSync(lock);
  } catch {
    const deadline = Date.now() + 900_000;
    while (!existsSync(join(root, "complete"))) {
      if (!existsSync(lock)) return convertedFixtures(); // the builder failed: try ourselves
      if (Date.now() > deadline) throw new Error(`${lock}: another test file has been building the fixtures for 15 minutes`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    return layout;
  }
  try {
    await build(root);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
  return layout;
}

async function build(root: string): Promise<void> {
  const building = `${root}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  await runConvertPython(["convert/make_tiny_checkpoints.py", join(building, "ckpt")]);
  const convert = (ckpt: string, out: string, ...extra: string[]) =>
    runConvertPython(["-m", "tessera_convert", join(building, "ckpt", ckpt), join(building, out), ...extra]);
  await Promise.all([convert("sdar", "sdar", "--weights", "fp32"), convert("fast_dllm_v2", "fast_dllm_v2", "--weights", "fp32")]);
  await Promise.all([convert("sdar", "sdar-fp16", "--weights", "fp16"), convert("sdar", "sdar-int4", "--weights", "int4")]);
  await convert("sdar", "sdar-int8", "--weights", "int8");
  await Promise.all([convert("qwen3", "qwen3", "--weights", "fp32"), convert("qwen2", "qwen2", "--weights", "fp32")]);
  mkdirSync(join(building, "complete"));
  renameSync(building, root);
}

/** A one-turn chat prompt through the model's own template, as the engine's tokens. */
export function chatPrompt(engine: ModelRuntime, text: string): number[] {
  return engine.model.tokenizer.encode(
    engine.model.renderChat({
      messages: [{ role: "user", content: text }],
      tools: [],
      tool_choice: "auto",
      forced_tool: "",
      response_format: "",
      json_schema: null,
      enable_thinking: false,
      add_generation_prompt: true,
    }),
  );
}
