import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, runConvertPython } from "../../../../test/helpers/converted-models.js";
import { GraphSampler } from "./graph-sampler.js";
import {
  acceptMask,
  type CanvasSamplerSettings,
  nextCanvas,
  noiseTokens,
  processRow,
  seededRandom,
  StableConfidentStop,
  temperatureAt,
} from "./sampler.js";

interface FixtureStep {
  stepsLeft: number;
  temperature: number;
  logits: number[][];
  current: number[][];
  uniforms: number[][];
  noise: number[][];
  entropy: number[][];
  sample: number[][];
  argmax: number[][];
  acceptedMask: boolean[][];
  accepted: number[][];
  renoised: number[][];
  stop: boolean[];
}
interface Fixture {
  settings: CanvasSamplerSettings;
  batch: number;
  canvas: number;
  vocab: number;
  steps: FixtureStep[];
}

describe.skipIf(!HAVE_CONVERT_VENV)("canvas sampler: equal to transformers' DiffusionGemma sampler on fixed logits and draws", () => {
  let fx: Fixture;
  let graph: GraphSampler;
  beforeAll(async () => {
    const { stdout } = await runConvertPython(["convert/tests/canvas_sampler_fixture.py"], 120_000);
    fx = JSON.parse(stdout) as Fixture;
    graph = await GraphSampler.create(fx.vocab, { executionProviders: ["cpu"], intraOpNumThreads: 1 });
  }, 120_000);
  afterAll(async () => {
    await graph?.release();
  });

  it("temperature schedule, entropies, samples, argmax, accepts, renoises and the stop, every step of both rows", async () => {
    const stops = fx.settings && Array.from({ length: fx.batch }, () => new StableConfidentStop(fx.settings));
    let acceptedSome = 0;
    let stopped = 0;
    for (const step of fx.steps) {
      expect(temperatureAt(fx.settings, step.stepsLeft)).toBeCloseTo(step.temperature, 12);
      for (let b = 0; b < fx.batch; b++) {
        const logits = Float32Array.from(step.logits[b]!);
        const row = processRow(logits, fx.canvas, fx.vocab, step.temperature, step.uniforms[b]!);
        // The graph the engine serves with gives the same per-position numbers.
        const served = await graph.processRow(logits, fx.canvas, step.temperature, step.uniforms[b]!);
        expect(Array.from(served.sample)).toEqual(step.sample[b]);
        expect(Array.from(served.argmax)).toEqual(step.argmax[b]);
        for (let i = 0; i < fx.canvas; i++) expect(served.entropy[i]).toBeCloseTo(step.entropy[b]![i]!, 4);
        expect(acceptMask(served.entropy, fx.settings.entropyBound)).toEqual(step.acceptedMask[b]);
        for (let i = 0; i < fx.canvas; i++) expect(row.entropy[i]).toBeCloseTo(step.entropy[b]![i]!, 4);
        expect(Array.from(row.argmax)).toEqual(step.argmax[b]);
        expect(Array.from(row.sample)).toEqual(step.sample[b]);
        // The engine's own entropies (float64) decide; the fixture keeps float32 sums off the boundary.
        const mask = acceptMask(row.entropy, fx.settings.entropyBound);
        expect(mask).toEqual(step.acceptedMask[b]);
        const accepted = step.current[b]!.map((t, i) => (mask[i] ? row.sample[i] : t));
        expect(accepted).toEqual(step.accepted[b]);
        expect(Array.from(nextCanvas(row.sample, mask, step.noise[b]!))).toEqual(step.renoised[b]);
        const stop = stops[b]!.step(row.argmax, row.entropy);
        expect(stop).toBe(step.stop[b]);
        acceptedSome += mask.filter(Boolean).length;
        if (stop) stopped++;
      }
    }
    // The fixture exercises both outcomes: partial accepts and a stop.
    expect(acceptedSome).toBeGreaterThan(fx.steps.length);
    expect(acceptedSome).toBeLessThan(fx.steps.length * fx.batch * fx.canvas);
    expect(stopped).toBeGreaterThan(0);
    expect(fx.steps.some((s) => s.stop.includes(false))).toBe(true);
  });
});

describe("canvas sampler: its own rules", () => {
  it("accepts at least the lowest-entropy position, ties by position, and stops only when stable and confident", () => {
    expect(acceptMask([5, 5, 5], 0.1)).toEqual([true, false, false]);
    expect(acceptMask([0.3, 0.01, 0.02, 2], 0.05)).toEqual([true, true, true, false]);
    const settings: CanvasSamplerSettings = {
      maxDenoisingSteps: 4,
      entropyBound: 0.1,
      tMin: 0.4,
      tMax: 0.8,
      stabilityThreshold: 2,
      confidenceThreshold: 0.01,
    };
    const stop = new StableConfidentStop(settings);
    const a = Int32Array.from([1, 2]);
    expect(stop.step(a, [0, 0])).toBe(false); // no history yet
    expect(stop.step(a, [0, 0])).toBe(false); // one step of history, two needed
    expect(stop.step(a, [0, 0.05])).toBe(false); // stable, not confident
    expect(stop.step(a, [0, 0.001])).toBe(true);
    expect(stop.step(Int32Array.from([1, 3]), [0, 0])).toBe(false);
  });

  it("noise is uniform over the vocabulary and reproducible from a seed", () => {
    const n = noiseTokens(20_000, 10, seededRandom(7));
    const counts = new Array(10).fill(0);
    for (const t of n) counts[t]++;
    for (const c of counts) expect(Math.abs(c - 2000)).toBeLessThan(200);
    expect(Array.from(noiseTokens(8, 10, seededRandom(7)))).toEqual(Array.from(n.slice(0, 8)));
  });
});
