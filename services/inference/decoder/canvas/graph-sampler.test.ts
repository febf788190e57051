import * as ort from "onnxruntime-node";
import { afterAll, describe, expect, it } from "vitest";
import { logprobsAt } from "../logprobs.js";
import { GraphSampler } from "./graph-sampler.js";
import { processRow, seededRandom } from "./sampler.js";

// Rows that exercise the edges: argmax ties, probabilities that underflow to exactly zero (in
// float32 and float64 alike: the sample must skip them), uniforms at 0 and just under 1, and
// ordinary spreads. (Probabilities that are zero in float32 only, as transformers' are, are where
// the graph and the float64 reference may part: not drawn here.)
function edgeLogits(C: number, V: number, seed: number): Float32Array {
  const random = seededRandom(seed);
  const logits = Float32Array.from({ length: C * V }, () => (random() - 0.5) * 12);
  // Position 0: a tie for the largest logit at ids 3 and 7.
  logits[3] = 40;
  logits[7] = 40;
  // Position 1: one id far above the rest (the others' probabilities vanish).
  for (let v = 0; v < V; v++) logits[V + v] = -100;
  logits[V + 5] = 100;
  // Position 2: ten leading ids whose probability is exactly zero, then a plateau.
  for (let v = 0; v < V; v++) logits[2 * V + v] = v < 10 ? -1e4 : 1;
  return logits;
}

/** The float64 probability of the ids above `id` at one position: at u = 1 - 2^-53 the draw must leave less than 1e-6 after it. */
function massAfter(logits: Float32Array, temperature: number, id: number): number {
  const max = Math.max(...Array.from(logits, (x) => x / temperature));
  const e = Array.from(logits, (x) => Math.exp(x / temperature - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.slice(id + 1).reduce((a, b) => a + b, 0) / sum;
}

describe("canvas sampler as an ONNX graph (real ONNX Runtime): equal to the JS reference", () => {
  const cpu = { executionProviders: ["cpu"], intraOpNumThreads: 1 };
  const graphs = new Map<number, GraphSampler>();
  const graphFor = async (vocab: number) => {
    if (!graphs.has(vocab)) graphs.set(vocab, await GraphSampler.create(vocab, cpu));
    return graphs.get(vocab)!;
  };
  afterAll(async () => {
    for (const g of graphs.values()) await g.release();
  });

  // 3000: six blocks of the two-level CDF, the last one padded; 1024: two whole blocks.
  it.each([3000, 1024])(
    "vocabulary %i: the same samples and argmax as processRow, entropies to 1e-5, over edges and random rows",
    async (V) => {
      const C = 24;
      const graph = await graphFor(V);
      let differentPicks = 0;
      const blocks = new Set<number>();
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
        const t = Math.fround(temperature);
        const want = processRow(logits, C, V, t, uniforms);
        const got = await graph.processRow(logits, C, t, uniforms);
        expect(Array.from(got.argmax)).toEqual(Array.from(want.argmax));
        // u just under 1 lands where float32 and float64 sums of the tail round: checked apart, below.
        expect(Array.from(got.sample).toSpliced(3, 1)).toEqual(Array.from(want.sample).toSpliced(3, 1));
        expect(massAfter(logits.subarray(3 * V, 4 * V), t, got.sample[3]!)).toBeLessThan(1e-6);
        for (let i = 0; i < C; i++) expect(Math.abs(got.entropy[i]! - want.entropy[i]!)).toBeLessThan(1e-5 * Math.max(1, want.entropy[i]!));
        expect(got.argmax[0]).toBe(3);
        expect(got.sample[1]).toBe(5);
        expect(got.sample[2]).toBe(10); // u = 0 skips the zero-probability ids
        differentPicks += got.sample.filter((t, i) => t !== got.argmax[i]).length;
        for (const id of got.sample) blocks.add(Math.floor(id / 512));
      }
      expect(differentPicks).toBeGreaterThan(0); // the samples are draws, not the argmax
      expect(blocks.size).toBe(Math.ceil(V / 512)); // every block of the CDF was drawn from
    },
  );

  it("a row of more than a million logits runs in chunks, each position as in one whole-row run (a device tensor's path) and as processRow", async () => {
    const C = 400;
    const V = 3000; // 349 positions a run: chunks of 349 and 51
    const graph = await graphFor(V);
    const logits = edgeLogits(C, V, 6);
    const uniforms = Float64Array.from({ length: C }, seededRandom(106));
    const t = Math.fround(0.9);
    const chunked = await graph.processRow(logits, C, t, uniforms);
    const whole = await graph.processRow(new ort.Tensor("float32", logits, [1, C, V]), C, t, uniforms);
    expect(Array.from(chunked.sample)).toEqual(Array.from(whole.sample));
    expect(Array.from(chunked.argmax)).toEqual(Array.from(whole.argmax));
    expect(Array.from(chunked.entropy)).toEqual(Array.from(whole.entropy));
    const want = processRow(logits, C, V, t, uniforms);
    expect(Array.from(chunked.sample)).toEqual(Array.from(want.sample));
    expect(Array.from(chunked.argmax)).toEqual(Array.from(want.argmax));
    const tokens = Array.from(want.argmax);
    const read = await graph.logprobs(logits, tokens, 2);
    expect(read.map((r) => r.top[0]!.token)).toEqual(tokens);
    const none = new Uint8Array(V);
    for (const i of [0, 348, 349, 399])
      expect(Math.abs(read[i]!.logprob - logprobsAt(logits, i * V, V, none, tokens[i]!, 0).logprob)).toBeLessThan(1e-5);
  });

  it("logprob readout: logprobsAt's logprobs (to 1e-5) and top alternatives (ties to the lower id), for top 0 and top 5", async () => {
    const C = 6;
    const V = 2000;
    const graph = await graphFor(V);
    const logits = edgeLogits(C, V, 5);
    logits[4 * V + 11] = 50; // position 4: three tied best, ids 11, 12, 900
    logits[4 * V + 12] = 50;
    logits[4 * V + 900] = 50;
    const tokens = Array.from(processRow(logits, C, V, 1, new Float64Array(C)).argmax.slice(0, 5));
    const none = new Uint8Array(V);
    for (const top of [0, 5]) {
      const got = await graph.logprobs(logits, tokens, top);
      expect(got.length).toBe(5);
      for (const [i, g] of got.entries()) {
        const want = logprobsAt(logits, i * V, V, none, tokens[i]!, top);
        expect(Math.abs(g.logprob - want.logprob)).toBeLessThan(1e-5);
        expect(g.top.map((t) => t.token)).toEqual(want.top.map((t) => t.token));
        for (const [j, t] of g.top.entries()) expect(Math.abs(t.logprob - want.top[j]!.logprob)).toBeLessThan(1e-5);
      }
      if (top === 5) expect(got[4]!.top.slice(0, 3).map((t) => t.token)).toEqual([11, 12, 900]);
    }
    await expect(graph.logprobs(logits, [tokens[0]! + 1], 2)).rejects.toThrow("is not its argmax");
  });
});
