import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { logprobsAt } from "../logprobs.js";
import { GraphSampler } from "./graph-sampler.js";
import { processRow, seededRandom } from "./sampler.js";

// Rows that exercise the edges: argmax ties, probabilities that underflow to exactly zero in
// doubles (the sample must skip them), uniforms at 0 and just under 1, and ordinary spreads.
function edgeLogits(C: number, V: number, seed: number): Float32Array {
  const random = seededRandom(seed);
  const logits = Float32Array.from({ length: C * V }, () => (random() - 0.5) * 12);
  // Position 0: a tie for the largest logit at ids 3 and 7.
  logits[3] = 40;
  logits[7] = 40;
  // Position 1: one id far above the rest (exp underflows to 0 for the others at T = 0.25).
  for (let v = 0; v < V; v++) logits[V + v] = -100;
  logits[V + 5] = 100;
  // Position 2: leading ids whose probability is exactly zero, then a plateau.
  for (let v = 0; v < V; v++) logits[2 * V + v] = v < 10 ? -400 : 1;
  return logits;
}

describe("canvas sampler as an ONNX graph (real ONNX Runtime): equal to the JS reference", () => {
  let exact: GraphSampler;
  let single: GraphSampler;
  beforeAll(async () => {
    exact = await GraphSampler.create({ precision: "float64", sessionOptions: { executionProviders: ["cpu"], intraOpNumThreads: 1 } });
    single = await GraphSampler.create({ precision: "float32", sessionOptions: { executionProviders: ["cpu"], intraOpNumThreads: 1 } });
  });
  afterAll(async () => {
    await exact?.release();
    await single?.release();
  });

  it("float64: the same samples and argmax as processRow, entropies to 1e-12, over edges and random rows", async () => {
    const C = 24;
    const V = 3000;
    let differentPicks = 0;
    for (const [seed, temperature] of [
      [1, 0.25],
      [2, 0.8],
      [3, 1.7],
    ] as const) {
      const logits = edgeLogits(C, V, seed);
      const random = seededRandom(seed + 100);
      const uniforms = Float64Array.from({ length: C }, random);
      uniforms[2] = 0;
      uniforms[3] = 1 - 2 ** -53;
      const want = processRow(logits, C, V, temperature, uniforms);
      const got = await exact.processRow(logits, C, V, temperature, uniforms);
      expect(Array.from(got.argmax)).toEqual(Array.from(want.argmax));
      expect(Array.from(got.sample)).toEqual(Array.from(want.sample));
      for (let i = 0; i < C; i++) expect(Math.abs(got.entropy[i]! - want.entropy[i]!)).toBeLessThan(1e-12);
      expect(got.argmax[0]).toBe(3);
      expect(got.sample[1]).toBe(5);
      if (temperature === 0.25) expect(got.sample[2]).toBe(10); // u = 0 skips the zero-probability ids
      differentPicks += got.sample.filter((t, i) => t !== got.argmax[i]).length;
    }
    expect(differentPicks).toBeGreaterThan(0); // the samples are draws, not the argmax
  });

  it("float32 (for providers without doubles): the same argmax, entropies to 1e-4, the samples of processRow off the CDF's rounding", async () => {
    const C = 24;
    const V = 3000;
    const logits = edgeLogits(C, V, 4);
    const uniforms = Float64Array.from({ length: C }, seededRandom(104));
    const want = processRow(logits, C, V, 0.8, uniforms);
    const got = await single.processRow(logits, C, V, 0.8, uniforms);
    expect(Array.from(got.argmax)).toEqual(Array.from(want.argmax));
    for (let i = 0; i < C; i++) expect(Math.abs(got.entropy[i]! - want.entropy[i]!)).toBeLessThan(1e-4);
    expect(got.sample.filter((t, i) => t !== want.sample[i]).length).toBeLessThanOrEqual(1);
  });

  it("logprob readout: logprobsAt's logprobs and top alternatives (ties to the lower id), for top 0 and top 5", async () => {
    const C = 6;
    const V = 2000;
    const logits = edgeLogits(C, V, 5);
    logits[4 * V + 11] = 50; // position 4: three tied best, ids 11, 12, 900
    logits[4 * V + 12] = 50;
    logits[4 * V + 900] = 50;
    const tokens = Array.from(processRow(logits, C, V, 1, new Float64Array(C)).argmax.slice(0, 5));
    const none = new Uint8Array(V);
    for (const top of [0, 5]) {
      const got = await exact.logprobs(logits, V, tokens, top);
      expect(got.length).toBe(5);
      for (const [i, g] of got.entries()) {
        const want = logprobsAt(logits, i * V, V, none, tokens[i]!, top);
        expect(g.logprob).toBeCloseTo(want.logprob, 12);
        expect(g.top.map((t) => t.token)).toEqual(want.top.map((t) => t.token));
        for (const [j, t] of g.top.entries()) expect(t.logprob).toBeCloseTo(want.top[j]!.logprob, 12);
      }
      if (top === 5) expect(got[4]!.top.slice(0, 3).map((t) => t.token)).toEqual([11, 12, 900]);
    }
    await expect(exact.logprobs(logits, V, [tokens[0]! + 1], 2)).rejects.toThrow("is not its argmax");
  });
});
