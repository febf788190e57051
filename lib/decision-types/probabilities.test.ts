import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { argmax, choiceFromLogits, confidence, entropy, noulFromLogits, scoreFromLogits, softmax } from "./probabilities.js";

// Logits as models produce them, plus the values a broken model could send.
const logit = fc.oneof(
  { weight: 8, arbitrary: fc.double({ min: -50, max: 50, noNaN: true }) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.constantFrom(Number.NaN, Infinity, -Infinity, 0, -0, 1e308, -1e308) },
);
const logits = (min: number, max: number) => fc.array(logit, { minLength: min, maxLength: max });
const temperature = fc.oneof(fc.double({ min: 0.05, max: 20, noNaN: true }), fc.constantFrom(1, 1e-300, 0, -1, Number.NaN, Infinity));

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const inUnit = (x: number) => Number.isFinite(x) && x >= 0 && x <= 1;

describe("softmax", () => {
  it("is finite, in [0, 1] and sums to 1 for any logits and temperature", () => {
    fc.assert(
      fc.property(logits(1, 128), temperature, (ls, t) => {
        const p = softmax(ls, t);
        expect(p).toHaveLength(ls.length);
        expect(p.every(inUnit)).toBe(true);
        expect(Math.abs(sum(p) - 1)).toBeLessThan(1e-9);
      }),
      { numRuns: 2000 },
    );
  });

  it("is unchanged by adding a constant to every logit", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -30, max: 30, noNaN: true }), { minLength: 1, maxLength: 128 }),
        fc.double({ min: -1000, max: 1000, noNaN: true }),
        (ls, c) => {
          const a = softmax(ls);
          const b = softmax(ls.map((l) => l + c));
          a.forEach((p, i) => {
            expect(Math.abs(p - b[i]!)).toBeLessThan(1e-9);
          });
        },
      ),
    );
  });

  it("matches exp(l/T)/Σ exp where that is computable", () => {
    const p = softmax([1, 2, 3], 2);
    const e = [1, 2, 3].map((l) => Math.exp(l / 2));
    p.forEach((pi, i) => {
      expect(pi).toBeCloseTo(e[i]! / sum(e), 15);
    });
  });

  it("does not overflow on huge logits", () => {
    expect(softmax([1000, 999])).toEqual(softmax([1, 0]));
    expect(softmax([1e308, -1e308])).toEqual([1, 0]);
  });

  it("treats NaN as no evidence, +Infinity as certainty, and all -Infinity as uniform", () => {
    expect(softmax([Number.NaN, 0])).toEqual([0, 1]);
    expect(softmax([Infinity, 5, Infinity])).toEqual([0.5, 0, 0.5]);
    expect(softmax([-Infinity, -Infinity])).toEqual([0.5, 0.5]);
    expect(softmax([Number.NaN, Number.NaN, Number.NaN, Number.NaN])).toEqual([0.25, 0.25, 0.25, 0.25]);
  });

  it("sharpens with a lower temperature and flattens with a higher one", () => {
    const base = softmax([2, 0])[0]!;
    expect(softmax([2, 0], 0.5)[0]!).toBeGreaterThan(base);
    expect(softmax([2, 0], 2)[0]!).toBeLessThan(base);
    expect(softmax([2, 0], 1e-300)).toEqual([1, 0]);
  });
});

describe("noul", () => {
  it("is P(yes) = softmax([yes, no])[0], in [0, 1]", () => {
    fc.assert(
      fc.property(logit, logit, temperature, (yes, no, t) => {
        const r = noulFromLogits([yes, no], t);
        expect(Object.keys(r)).toEqual(["probability"]);
        expect(inUnit(r.probability)).toBe(true);
        expect(r.probability).toBe(softmax([yes, no], t)[0]);
      }),
      { numRuns: 2000 },
    );
    expect(noulFromLogits([0, 0]).probability).toBe(0.5);
    expect(noulFromLogits([Math.log(3), 0]).probability).toBeCloseTo(0.75, 15);
  });
});

describe("choice", () => {
  it("is the argmax (first on ties), with probabilities over every option summing to 1", () => {
    fc.assert(
      fc.property(logits(1, 128), temperature, (ls, t) => {
        const r = choiceFromLogits(ls, t);
        expect(r.probabilities).toHaveLength(ls.length);
        expect(r.probabilities.every(inUnit)).toBe(true);
        expect(Math.abs(sum(r.probabilities) - 1)).toBeLessThan(1e-9);
        const max = Math.max(...r.probabilities);
        expect(r.probabilities[r.index]).toBe(max);
        expect(r.probabilities.indexOf(max)).toBe(r.index);
        expect(inUnit(r.confidence)).toBe(true);
      }),
      { numRuns: 2000 },
    );
    expect(choiceFromLogits([1, 3, 3]).index).toBe(1);
  });

  it("has confidence 1 − H(p)/ln K, and 1 for K = 1", () => {
    fc.assert(
      fc.property(logits(2, 128), (ls) => {
        const r = choiceFromLogits(ls);
        const expected = 1 - entropy(r.probabilities) / Math.log(ls.length);
        expect(Math.abs(r.confidence - Math.min(1, Math.max(0, expected)))).toBeLessThan(1e-12);
      }),
      { numRuns: 1000 },
    );
    fc.assert(
      fc.property(logit, (l) => {
        expect(choiceFromLogits([l]).confidence).toBe(1);
      }),
    );
    expect(choiceFromLogits([5]).probabilities).toEqual([1]);
    expect(choiceFromLogits([0, 0, 0, 0]).confidence).toBeCloseTo(0, 12);
    expect(choiceFromLogits([0, -Infinity, -Infinity]).confidence).toBe(1);
  });

  it("handles 128 options", () => {
    const ls = Array.from({ length: 128 }, (_, i) => Math.sin(i) * 10);
    const r = choiceFromLogits(ls);
    expect(r.index).toBe(argmax(ls));
    expect(Math.abs(sum(r.probabilities) - 1)).toBeLessThan(1e-12);
  });
});

describe("score", () => {
  it("is Σ i·p_i within [0, L − 1], with confidence as for choice", () => {
    fc.assert(
      fc.property(logits(2, 10), temperature, (ls, t) => {
        const r = scoreFromLogits(ls, t);
        expect(r.probabilities.every(inUnit)).toBe(true);
        expect(Math.abs(sum(r.probabilities) - 1)).toBeLessThan(1e-9);
        const expected = r.probabilities.reduce((a, p, i) => a + i * p, 0);
        expect(Math.abs(r.score - expected)).toBeLessThan(1e-12);
        expect(r.score).toBeGreaterThanOrEqual(0);
        expect(r.score).toBeLessThanOrEqual(ls.length - 1);
        expect(r.confidence).toBe(confidence(r.probabilities));
      }),
      { numRuns: 2000 },
    );
    expect(scoreFromLogits([0, 0, 0]).score).toBeCloseTo(1, 15);
    expect(scoreFromLogits([-Infinity, -Infinity, 0]).score).toBe(2);
  });

  it("also works for any option count 1..128 (the math does not limit it)", () => {
    fc.assert(
      fc.property(logits(1, 128), (ls) => {
        const r = scoreFromLogits(ls);
        expect(Number.isFinite(r.score)).toBe(true);
        expect(inUnit(r.confidence)).toBe(true);
      }),
    );
  });
});
