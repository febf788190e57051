// A GPU provider that cannot start is never a silent fallback: in this process no Vulkan loader
// is on the library path, so WebGPU finds no adapter (webgpu.test.ts runs it where one is).
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../../lib/logger.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";
import { loadModelDir } from "../engine/model-dir.js";

const noVulkan = !(process.env.LD_LIBRARY_PATH ?? "").includes("chromium") && process.env.VK_ICD_FILENAMES === undefined;

describe.skipIf(!noVulkan)("a WebGPU session without an adapter", () => {
  it("fails the load naming the cause and the fix", async () => {
    const err = await loadModelDir(TINY_MODEL_DIR, { executionProviders: ["webgpu"], worker: false }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain(`${path.join(TINY_MODEL_DIR, "model.onnx")}: `);
    expect(err?.message).toMatch(/no WebGPU adapter .*No supported adapters/);
    expect(err?.message).toMatch(/Fix: install the GPU's Vulkan driver .*TESSERA_GPU_FALLBACK=cpu/);
  });

  it("runs on the CPU only where the operator allows it, and says why in the log", async () => {
    const lines: string[] = [];
    const logger = createLogger({ destination: { write: (line: string) => lines.push(line) } as never });
    const model = await loadModelDir(TINY_MODEL_DIR, { executionProviders: ["webgpu"], worker: false, fallback: "cpu", logger });
    try {
      expect(model.executionProviders).toEqual(["cpu"]);
      expect(model.deviceKV).toBeUndefined();
      const warning = lines.map((l) => JSON.parse(l) as { level: string; msg: string; fix?: string }).find((l) => l.level === "warn");
      expect(warning?.msg).toMatch(/no WebGPU adapter .*using the CPU as TESSERA_GPU_FALLBACK=cpu allows/);
      expect(warning?.fix).toMatch(/vk_swiftshader_icd\.json/);
    } finally {
      await model.close();
    }
  });
});
