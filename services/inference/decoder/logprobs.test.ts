import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { logprobsAt } from "./logprobs.js";
import { bannedTokens } from "../core/banned-tokens.js";

/** The log-softmax over the allowed tokens, the plain way. */
function reference(logits: number[], banned: Set<number>): number[] {
  const allowed = logits.map((x, v) => (banned.has(v) ? -Infinity : x));
  const max = Math.max(...allowed);
  const logZ = max + Math.log(allowed.reduce((s, x) => s + Math.exp(x - max), 0));
  return allowed.map((x) => x - logZ);
}

describe("logprobsAt", () => {
  it("gives the log-softmax of the token and the k best, banned tokens left out", () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: -20, max: 20, noNaN: true }), { minLength: 3, maxLength: 60 }),
        fc.nat(),
        fc.integer({ min: 0, max: 20 }),
        (values, pick, k) => {
          const vocab = values.length;
          const banned = new Set([0, vocab - 1]);
          const logits = Float32Array.from(values);
          const token = 1 + (pick % (vocab - 2));
          const expected = reference([...logits], banned);
          const got = logprobsAt(logits, 0, vocab, bannedTokens(vocab, [...banned]), token, k);
          expect(got.logprob).toBeCloseTo(Math.min(0, expected[token]!), 5);
          const order = expected
            .map((logprob, v) => ({ token: v, logprob }))
            .filter((e) => !banned.has(e.token))
            .sort((a, b) => logits[b.token]! - logits[a.token]! || a.token - b.token)
            .slice(0, k);
          expect(got.top.map((t) => t.token)).toEqual(order.map((t) => t.token));
          for (const [i, t] of got.top.entries()) expect(t.logprob).toBeCloseTo(Math.min(0, order[i]!.logprob), 5);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("reads the row at its offset", () => {
    const logits = Float32Array.of(9, 9, 9, 0, Math.log(3), 0);
    const got = logprobsAt(logits, 3, 3, new Uint8Array(3), 1, 2);
    expect(got.logprob).toBeCloseTo(Math.log(3 / 5), 6);
    expect(got.top).toEqual([
      { token: 1, logprob: expect.closeTo(Math.log(3 / 5), 6) },
      { token: 0, logprob: expect.closeTo(Math.log(1 / 5), 6) },
    ]);
  });
});
