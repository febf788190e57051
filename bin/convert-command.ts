import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const CONVERT_HELP = `Usage:
  tessera convert <checkpoint-dir> <model-dir> [--block-size N] [--weights int8|fp32|fp16|int4]
                  [--experts auto|dense|sparse] [--force] [--time-limit SECONDS] [--memory-limit GB]
      Convert a Hugging Face SDAR, Fast-dLLM v2 or DiffusionGemma checkpoint directory into a
      Tessera model directory (docs/model-contract.md). --experts (DiffusionGemma): sparse
      computes each token's routed experts only, dense all of them; auto picks by experts / top k. Runs the Python converter under convert/ with
      TESSERA_CONVERT_PYTHON (default convert/.venv/bin/python). The checkpoint is data, never code
      (docs/security.md): --time-limit (default 12 h) and --memory-limit (default twice the
      machine's memory plus swap) bound the whole conversion.
  tessera convert --setup
      Create convert/.venv from convert/requirements.txt (PyTorch CPU, ONNX Runtime,
      transformers: about 1 GB to download, once).
`;

export const SETUP_COMMAND = "npx tessera convert --setup";

/** The repository's convert/ folder: beside bin/ in the sources, two levels up from dist/bin/. */
export function convertDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = path.join(dir, "convert");
    if (existsSync(path.join(candidate, "tessera_convert", "__main__.py"))) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error("convert/tessera_convert is not next to this installation of tessera");
}

export function convertPython(configured: string, root = convertDir()): string {
  if (configured !== "") return configured;
  const venv = path.join(root, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** Runs the converter with the terminal attached (its progress goes to stderr); resolves to its exit status. */
export function runConvert(args: readonly string[], python: string): Promise<number> {
  if (args.length === 0 || args.includes("--help") || args.includes("-h")) {
    process.stdout.write(CONVERT_HELP);
    return Promise.resolve(args.length === 0 ? 2 : 0);
  }
  const root = convertDir();
  if (args[0] === "--setup") return setupVenv(root);
  return new Promise((resolve) => {
    const child = spawn(python, ["-m", "tessera_convert", ...args], {
      stdio: "inherit",
      env: { ...process.env, PYTHONPATH: [root, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) },
    });
    child.on("error", (err) => {
      process.stderr.write(`tessera convert: cannot run ${python}: ${err.message}\n${CONVERT_HELP}`);
      resolve(1);
    });
    child.on("exit", (code, signal) => resolve(code ?? (signal !== null ? 1 : 0)));
  });
}

function step(command: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: "inherit" });
    child.on("error", (err) => {
      process.stderr.write(`tessera convert --setup: cannot run ${command}: ${err.message}\n`);
      resolve(1);
    });
    child.on("exit", (code) => resolve(code ?? 1));
  });
}

/** Creates convert/.venv and installs the pinned requirements, pip's progress on the terminal. */
export async function setupVenv(root: string): Promise<number> {
  const venv = path.join(root, ".venv");
  const requirements = path.join(root, "requirements.txt");
  process.stderr.write(`tessera convert --setup: creating ${venv} from ${requirements} (about 1 GB to download)\n`);
  if (!existsSync(path.join(venv, "bin", "python"))) {
    const made = await step("python3", ["-m", "venv", venv]);
    if (made !== 0) return made;
  }
  const pip = path.join(venv, "bin", "pip");
  const installed = await step(pip, ["install", "--disable-pip-version-check", "--progress-bar", "on", "-r", requirements]);
  if (installed === 0) process.stderr.write("tessera convert --setup: done; `tessera convert` now uses it\n");
  return installed;
}
