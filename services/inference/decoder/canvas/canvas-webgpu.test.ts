// The canvas decode loop with the tiny DiffusionGemma's sessions on the WebGPU provider
// (SwiftShader) against the CPU's: test/helpers/canvas-webgpu-scenario.ts, in a child process
// (test/helpers/swiftshader.ts). Two rows batched (and one row a forward), two canvases of 4 steps each, logprobs on.
import { describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV } from "../../../../test/helpers/converted-models.js";
import { haveSwiftShader, runWithSwiftShader } from "../../../../test/helpers/swiftshader.js";
import type { ForwardTransfer } from "../forward.js";

interface Run {
  providers: string[];
  tokens: number[][];
  steps: number[];
  /** Per row, per token: [token, logprob, top ids...]. */
  logprobs: number[][][];
  forwards: number;
  /** The decision readout's p(token) for three tokens. */
  readout: number[];
  transfer: ForwardTransfer;
}

describe.skipIf(!haveSwiftShader || !HAVE_CONVERT_VENV)("canvas decoding on WebGPU (SwiftShader, tiny DiffusionGemma)", () => {
  it("follows the CPU path with fixed draws (the first canvas token for token), its logits and self-conditioning left on the device", async () => {
    const { cpu, webgpu, alternating } = await runWithSwiftShader<{ cpu: Run; webgpu: Run; alternating: Run }>(
      "test/helpers/canvas-webgpu-scenario.ts",
      280_000,
    );
    expect(cpu.providers).toEqual(["cpu"]);
    expect(webgpu.providers).toEqual(["webgpu", "cpu"]);
    // SwiftShader's floats differ from the CPU's by up to ~1e-2 on this random model, and a draw
    // landing that close to a boundary of the inverse CDF picks the neighbouring token: the first
    // canvas must match exactly, the rest position for position almost everywhere.
    const canvas = 16;
    expect(webgpu.tokens.every((t) => t.length > canvas)).toBe(true); // two canvases each
    const agree = (a: number[][], b: number[][]) => {
      const pairs = a.flatMap((row, r) => row.map((t, i) => t === b[r]![i]));
      return pairs.filter(Boolean).length / pairs.length;
    };
    expect(webgpu.tokens.map((row) => row.slice(0, canvas))).toEqual(cpu.tokens.map((row) => row.slice(0, canvas)));
    expect(agree(webgpu.tokens, cpu.tokens)).toBeGreaterThanOrEqual(0.9);
    expect(webgpu.steps).toEqual(cpu.steps);
    expect(webgpu.forwards).toBe(cpu.forwards);
    // A decision's readout on the device's logits: the CPU's probabilities.
    expect(webgpu.readout).toHaveLength(3);
    webgpu.readout.forEach((p, i) => {
      expect(Math.abs(p - cpu.readout[i]!)).toBeLessThan(2e-2 * cpu.readout[i]!);
    });
    // One row a forward: the kept self-conditioning belongs to the other row each step and comes back to the host.
    expect(agree(alternating.tokens, webgpu.tokens)).toBeGreaterThanOrEqual(0.9);
    expect(alternating.forwards).toBe(cpu.steps[0]! + cpu.steps[1]!);
    // Logprobs: the same tokens and top ids; values within SwiftShader's float error on this model.
    const sameUntil = (r: number) => {
      const diff = webgpu.tokens[r]!.findIndex((t, i) => t !== cpu.tokens[r]![i]);
      return diff < 0 ? Number.POSITIVE_INFINITY : Math.floor(diff / canvas) * canvas;
    };
    webgpu.logprobs.forEach((row, r) => {
      row.forEach(([token, logprob, ...top], i) => {
        const [cToken, cLogprob, ...cTop] = cpu.logprobs[r]![i]!;
        if (i >= sameUntil(r)) return; // canvases after a neighbouring draw (above) see other tokens
        expect([token, ...top]).toEqual([cToken, ...cTop]);
        expect(Math.abs(logprob! - cLogprob!)).toBeLessThan(2e-2);
      });
    });
    // The logits ([B, 16, 384] a step) and the self-conditioning stay on the device: what comes to
    // the host besides the encoder's key/values is a small part of the all-on-host figure.
    expect(webgpu.transfer.toHost.kv).toBe(cpu.transfer.toHost.kv);
    expect(webgpu.transfer.toHost.other * 5).toBeLessThan(cpu.transfer.toHost.other);
    // Past key/values and masks go up once per canvas, not once per step.
    expect(webgpu.transfer.toDevice.kv * 1.5).toBeLessThan(cpu.transfer.toDevice.kv);
  }, 300_000);
});
