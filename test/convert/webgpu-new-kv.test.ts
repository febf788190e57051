// A converted model's `present_new.*` on the WebGPU provider (SwiftShader, as webgpu.test.ts):
// each autoregressive step's new key/values stay on the device and are appended there from their
// own slot 0; the greedy replies equal the CPU provider's, no key/value byte crosses, and every
// device tensor is given back. The scenario runs in a child process (test/helpers/swiftshader.ts).
import { describe, expect, it } from "vitest";
import { haveSwiftShader, runWithSwiftShader } from "../helpers/swiftshader.js";
import { convertedFixtures, HAVE_CONVERT_VENV } from "../helpers/converted-models.js";

interface Scenario {
  cpu: number[][];
  webgpu: number[][];
  outputs: number;
  held: number;
  kvBytes: Record<string, number>;
}

describe.skipIf(!haveSwiftShader || !HAVE_CONVERT_VENV)("present_new on WebGPU (SwiftShader)", () => {
  it("keeps the new key/values on the device, answers as the CPU provider does and gives every tensor back", async () => {
    const fx = await convertedFixtures();
    process.env.TESSERA_NEW_KV_MODEL = fx.models.qwen3;
    const s = await runWithSwiftShader<Scenario>("test/helpers/webgpu-new-kv-scenario.ts", 280_000);
    expect(s.outputs).toBeGreaterThan(0);
    expect(s.webgpu).toEqual(s.cpu);
    expect(s.cpu.every((r) => r.length > 1)).toBe(true);
    expect(s.kvBytes["to_device/kv"]).toBe(0);
    expect(s.kvBytes["to_host/kv"]).toBe(0);
    expect(s.kvBytes["to_host/other"]).toBeGreaterThan(0);
    expect(s.held).toBe(0);
  }, 900_000);
});
