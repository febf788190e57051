import { describe, expect, it } from "vitest";
import { softmax } from "../../../lib/decision-types/probabilities.js";
import { accuracy, expectedCalibrationError, fitTemperature, type LabelledReadout, logLikelihood, meanNll } from "./fit.js";

/** mulberry32: a seeded uniform generator, so the synthetic sets are the same on every run. */
function uniform(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Readouts whose labels are drawn from softmax(logits / trueT): a model miscalibrated by exactly trueT. */
function synthetic(trueT: number, labels: number, n: number, seed: number): LabelledReadout[] {
  const u = uniform(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
  return Array.from({ length: n }, () => {
    const logits = Array.from({ length: labels }, () => 3 * normal());
    const p = softmax(logits, trueT);
    let x = u();
    let target = 0;
    while (target < labels - 1 && x >= p[target]!) x -= p[target++]!;
    return { logits, target };
  });
}

describe("fitTemperature", () => {
  it.each([
    [0.5, 2],
    [2.5, 2],
    [0.7, 5],
    [4, 10],
  ])("recovers a known temperature %s over %s labels within 5 percent", (trueT, labels) => {
    const readouts = synthetic(trueT, labels, 6000, 17 + labels);
    const fitted = fitTemperature(readouts);
    expect(Math.abs(fitted / trueT - 1)).toBeLessThan(0.05);
    // The fit is the minimum: nudging T either way only raises the NLL.
    expect(meanNll(readouts, fitted)).toBeLessThanOrEqual(meanNll(readouts, fitted * 1.05));
    expect(meanNll(readouts, fitted)).toBeLessThanOrEqual(meanNll(readouts, fitted / 1.05));
    // ...and temperature scaling lowers the calibration error of the miscalibrated T = 1 readout.
    expect(expectedCalibrationError(readouts, fitted)).toBeLessThan(expectedCalibrationError(readouts, 1));
  });

  it("stays inside the searched range when the labels are always (or never) the top logit", () => {
    const always = [{ logits: [2, 0], target: 0 }];
    const never = [{ logits: [2, 0], target: 1 }];
    // Sharper is always better, until the NLL is flat in float64 (about 1e-17 at T = 0.05).
    expect(fitTemperature(always)).toBeLessThan(0.06);
    expect(fitTemperature(never)).toBeCloseTo(20, 4);
  });
});

describe("the metrics", () => {
  it("computes the log-likelihood exactly, far into the tail and for degenerate logits", () => {
    expect(logLikelihood({ logits: [0, 0], target: 0 }, 1)).toBeCloseTo(-Math.log(2), 12);
    expect(logLikelihood({ logits: [0, 2], target: 0 }, 2)).toBeCloseTo(-Math.log(1 + Math.E), 12);
    // softmax's probability is 0 in float64 here; the log-likelihood is still the exact -2000.
    expect(logLikelihood({ logits: [2000, 0], target: 1 }, 1)).toBeCloseTo(-2000, 9);
    expect(Number.isFinite(logLikelihood({ logits: [0, Number.NEGATIVE_INFINITY], target: 1 }, 1))).toBe(true);
    expect(logLikelihood({ logits: [Number.NaN, 1], target: 1 }, 1)).toBe(0);
  });

  it("bins the top label's probability in 15 equal bins for the ECE", () => {
    const p08 = Math.log(4); // softmax([ln 4, 0]) = [0.8, 0.2]
    expect(expectedCalibrationError([{ logits: [p08, 0], target: 0 }], 1)).toBeCloseTo(0.2, 12);
    expect(
      expectedCalibrationError(
        [
          { logits: [p08, 0], target: 0 },
          { logits: [p08, 0], target: 1 },
        ],
        1,
      ),
    ).toBeCloseTo(0.3, 12);
    // Two bins of one readout each, weighted by their share.
    expect(
      expectedCalibrationError(
        [
          { logits: [p08, 0], target: 0 },
          { logits: [0, 0, 0], target: 0 },
        ],
        1,
      ),
    ).toBeCloseTo(0.5 * 0.2 + 0.5 * (2 / 3), 12);
  });

  it("counts accuracy by the top label", () => {
    expect(
      accuracy([
        { logits: [1, 0], target: 0 },
        { logits: [0, 1, 3], target: 1 },
      ]),
    ).toBe(0.5);
  });
});
