// The grouping of readout rows into forwards: every row exactly once, rows of similar length
// together, within the memory budget, and never costlier than one forward for all.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planReadoutForwards } from "./score-plan.js";

const row = (length: number, id: number) => ({ tokens: new Array<number>(length).fill(0), id });

/** The cost the plan minimises, as documented in score-plan.ts. */
function cost(groups: { tokens: unknown[] }[][], past: number): number {
  return groups.reduce((sum, g) => {
    const seq = Math.max(...g.map((r) => r.tokens.length));
    return sum + 16 * (1024 + past) + g.length * seq * (1024 + past + seq);
  }, 0);
}

describe("planReadoutForwards", () => {
  it("keeps every row exactly once, longest first, equal lengths in their given order, within maxRows", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 0, max: 2048 }),
        fc.integer({ min: 1, max: 20 }),
        (lengths, past, cap) => {
          const rows = lengths.map(row);
          const groups = planReadoutForwards(rows, past, () => cap);
          const flat = groups.flat();
          expect(flat.map((r) => r.id).sort((a, b) => a - b)).toEqual(rows.map((r) => r.id));
          for (let i = 1; i < flat.length; i++) {
            const [a, b] = [flat[i - 1]!, flat[i]!];
            expect(a.tokens.length).toBeGreaterThanOrEqual(b.tokens.length);
            if (a.tokens.length === b.tokens.length) expect(a.id).toBeLessThan(b.id);
          }
          for (const g of groups) expect(g.length).toBeGreaterThanOrEqual(1);
          for (const g of groups) expect(g.length).toBeLessThanOrEqual(cap);
        },
      ),
    );
  });

  it("is never costlier than one forward for all rows", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 0, max: 2048 }),
        (lengths, past) => {
          const rows = lengths.map(row);
          expect(
            cost(
              planReadoutForwards(rows, past, () => Infinity),
              past,
            ),
          ).toBeLessThanOrEqual(cost([rows], past));
        },
      ),
    );
  });

  it("splits the decision benchmark's 16 questions by length instead of padding them all to the longest", () => {
    const lengths = [22, 36, 53, 46, 40, 47, 24, 23, 38, 51, 22, 37, 24, 46, 46, 22];
    const groups = planReadoutForwards(lengths.map(row), 1024, () => Infinity);
    expect(groups.map((g) => g.map((r) => r.tokens.length))).toEqual([
      [53, 51],
      [47, 46, 46, 46],
      [40, 38, 37, 36],
      [24, 24, 23, 22, 22, 22],
    ]);
    const padded = (gs: { tokens: unknown[] }[][]) => gs.reduce((n, g) => n + g.length * Math.max(...g.map((r) => r.tokens.length)), 0);
    expect(padded(groups)).toBe(598); // of 577 real tokens; one forward would be 848
  });

  it("keeps rows of one length together and a single row alone", () => {
    expect(planReadoutForwards([row(30, 0), row(30, 1), row(30, 2)], 512, () => Infinity)).toHaveLength(1);
    expect(planReadoutForwards([row(7, 0)], 0, () => Infinity)).toEqual([[row(7, 0)]]);
    expect(planReadoutForwards([], 0, () => Infinity)).toEqual([]);
  });

  it("splits a group the memory budget cannot hold", () => {
    const groups = planReadoutForwards(
      Array.from({ length: 10 }, (_, i) => row(40, i)),
      1024,
      (seq) => (seq === 40 ? 3 : 0),
    );
    expect(groups.map((g) => g.length)).toEqual([3, 3, 3, 1]);
  });
});
