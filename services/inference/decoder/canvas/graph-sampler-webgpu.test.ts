// The canvas sampler graph on the WebGPU provider through SwiftShader, fed the logits as a device
// tensor (test/helpers/sampler-webgpu-scenario.ts, in a child process: test/helpers/swiftshader.ts).
import { describe, expect, it } from "vitest";
import { haveSwiftShader, runWithSwiftShader } from "../../../../test/helpers/swiftshader.js";

interface Scenario {
  location: string;
  argmax: [number[], number[]];
  sample: [number[], number[]];
  entropy: [number[], number[]];
}

describe.skipIf(!haveSwiftShader)("canvas sampler graph on WebGPU (SwiftShader)", () => {
  it("takes the logits as a device tensor and gives the JS reference's argmax and samples", async () => {
    const s = await runWithSwiftShader<Scenario>("test/helpers/sampler-webgpu-scenario.ts", 100_000);
    expect(s.location).toBe("gpu-buffer");
    expect(s.argmax[0]).toEqual(s.argmax[1]);
    expect(s.sample[0]).toEqual(s.sample[1]);
    // SwiftShader's exp is not the CPU's: entropies agree to 1e-5 relative.
    s.entropy[0].forEach((h, i) => {
      expect(Math.abs(h - s.entropy[1][i]!)).toBeLessThan(1e-5 * Math.max(1, s.entropy[1][i]!));
    });
  }, 120_000);
});
