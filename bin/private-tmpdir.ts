import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * Points TMPDIR at a folder of this process's own (mode 0700, removed at exit) before any ONNX
 * Runtime session opens: its telemetry layer writes `mat-debug-<pid>.log` into TMPDIR, a
 * predictable path in a shared /tmp otherwise. Worker threads share the process environment.
 */
export function usePrivateTmpdir(env: NodeJS.ProcessEnv = process.env): string {
  const dir = mkdtempSync(path.join(tmpdir(), "tessera-"));
  env.TMPDIR = dir;
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
