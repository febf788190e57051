// huggingface_hub (the Hub's own Python client) from the converter's environment, run
// against the Hub double: the double must be good enough for it, and what it downloads
// must be what tessera pull reuses.
import { spawn } from "node:child_process";
import { CONVERT_PYTHON } from "../helpers/converted-models.js";

export { HAVE_CONVERT_VENV } from "../helpers/converted-models.js";

/** Runs a Python snippet with convert/.venv's Python (asynchronously: the double answers in this process). */
export function runPython(code: string, env: Record<string, string>, timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(CONVERT_PYTHON, ["-c", code], {
      env: { ...process.env, HF_HUB_DISABLE_TELEMETRY: "1", HF_HUB_DISABLE_PROGRESS_BARS: "1", HF_TOKEN: "", ...env },
      timeout: timeoutMs,
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`python exited ${code}:\n${err.slice(-3000)}`))));
  });
}
