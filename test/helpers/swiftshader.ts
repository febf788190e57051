// WebGPU on this CPU through SwiftShader (Debian's chromium package ships it; .ci/run installs
// chromium). A script that uses the WebGPU provider runs in a child process: the Vulkan loader
// is found through LD_LIBRARY_PATH, which the dynamic loader reads only when a process starts.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./tessera.js";

const CHROMIUM = "/usr/lib/chromium";
export const SWIFTSHADER_ICD = path.join(CHROMIUM, "vk_swiftshader_icd.json");
export const haveSwiftShader = existsSync(SWIFTSHADER_ICD) && existsSync(path.join(CHROMIUM, "libvulkan.so.1"));

/** Runs `script` (a path from the repository root) under tsx with SwiftShader's Vulkan; resolves with its last stdout line as JSON. */
export function runWithSwiftShader<T>(script: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", script], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        VK_ICD_FILENAMES: SWIFTSHADER_ICD,
        LD_LIBRARY_PATH: [CHROMIUM, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const line = stdout.trim().split("\n").at(-1) ?? "";
      if (code !== 0 || line === "") reject(new Error(`${script} exited ${code}:\n${stderr.slice(-4000)}`));
      else resolve(JSON.parse(line) as T);
    });
  });
}
