import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const CONVERT_HELP = `Usage:
  tessera convert <checkpoint-dir> <model-dir> [--block-size N] [--weights fp32|fp16|int4] [--force]
      Convert a Hugging Face SDAR or Fast-dLLM v2 checkpoint directory into a Tessera model
      directory (docs/model-contract.md). Runs the Python converter under convert/ with
      TESSERA_CONVERT_PYTHON (default convert/.venv/bin/python; create it with
      python3 -m venv convert/.venv && convert/.venv/bin/pip install -r convert/requirements.txt).
`;

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
