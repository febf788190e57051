// `tessera serve` in a child process, as an operator starts it: for tests that need a second
// process on the same data directory (LMDB allows one open per process) or a real SIGTERM.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { REPO_ROOT } from "./tessera.js";

export interface ServeProcess {
  child: ChildProcess;
  /** The gateway's base URL, from the "tessera listening" log line. */
  url: string;
  /** Every stdout line so far: log lines and plain printed text. */
  output: string[];
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function spawnTesseraServe(env: Record<string, string>, timeoutMs = 30_000, args: string[] = []): Promise<ServeProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "bin/tessera.ts", "serve", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, TESSERA_HOST: "127.0.0.1", TESSERA_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const output: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`no "tessera listening" line within ${timeoutMs} ms in:\n${output.join("\n")}`));
    }, timeoutMs);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`tessera serve exited ${code} before listening:\n${output.join("\n")}`));
    });
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output.push(line);
      if (line.includes('"tessera listening"')) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { url: string }).url);
      }
    });
  });
  return {
    child,
    url,
    output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}
