// The `tessera` command line in a child process, as a user runs it (pull, models, …).
import { spawn } from "node:child_process";
import { REPO_ROOT } from "./tessera.js";

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `tessera <args>` with `env` over this process's; `onStderr` sees its stderr as it comes. */
export function runTessera(args: string[], env: Record<string, string>, onStderr?: (text: string) => void): Promise<CliRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "bin/tessera.ts", ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      onStderr?.(stderr);
    });
    child.on("error", reject);
    child.on("exit", (status) => resolve({ status, stdout, stderr, ms: Date.now() - started }));
  });
}
