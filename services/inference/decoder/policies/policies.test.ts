// The unmasking policies' rules on guesses written by the test (this folder): the
// threshold, one position a step, the end-of-turn fill suffix and the fill after a committed
// end of turn, credit over steps, sub-block order; every policy commits at least one masked
// position a step; and the spec parser.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ForwardOutputs } from "../forward.js";
import type { Guess, StepContext } from "./policy.js";
import { buildPolicy, parsePolicySpec } from "./registry.js";
import { StopMatcher } from "../reply-text.js";
import { Sequence } from "../sequence.js";

const EOS = 3;
const MASK = 1;

/** A block of `length` positions, the given ones committed; the rest masked with guesses from `guess`. */
function context(
  length: number,
  guess: Record<number, [token: number, confidence: number]>,
  options: { committed?: Record<number, number>; history?: Guess[][]; replyStart?: number } = {},
): StepContext {
  const tokens = new Array<number>(length).fill(MASK);
  const masked = new Array<boolean>(length).fill(true);
  for (const [j, t] of Object.entries(options.committed ?? {})) {
    tokens[Number(j)] = t;
    masked[Number(j)] = false;
  }
  const guesses: Guess[] = [];
  for (let j = 0; j < length; j++) {
    if (!masked[j]) continue;
    const [token, confidence] = guess[j] ?? [10 + j, 0.1];
    guesses.push({ index: j, token, confidence });
  }
  return {
    block: { tokens, masked, replyStart: options.replyStart ?? 0, start: 64 },
    guesses,
    history: options.history ?? [],
    eosTokenId: EOS,
  };
}

const indexes = (spec: string, ctx: StepContext) =>
  buildPolicy(spec)
    .choose(ctx)
    .map((c) => c.index);

describe("threshold and sequential", () => {
  it("threshold commits every guess at or above it, else the most confident one", () => {
    expect(indexes("threshold(0.9)", context(8, { 2: [5, 0.95], 3: [6, 0.9], 4: [7, 0.89] }))).toEqual([2, 3]);
    expect(indexes("threshold(0.9)", context(8, { 5: [7, 0.6], 6: [7, 0.6] }))).toEqual([5]);
  });

  it("sequential commits exactly one position, the most confident (the first on ties)", () => {
    const ctx = context(8, { 1: [5, 0.99], 4: [6, 0.999], 6: [6, 0.999] });
    expect(buildPolicy("sequential").choose(ctx)).toEqual([{ index: 4, token: 6 }]);
  });
});

describe("end-of-turn fill", () => {
  it("commits the longest suffix guessed end-of-turn at the fill confidence, at once", () => {
    // 5..7 are end of turn at 0.55-0.7 (below the threshold); 4 is end of turn at 0.3.
    const ctx = context(8, { 4: [EOS, 0.3], 5: [EOS, 0.55], 6: [EOS, 0.6], 7: [EOS, 0.7], 0: [20, 0.95] });
    expect(indexes("fill(0.5)+threshold(0.9)", ctx)).toEqual([0, 5, 6, 7]);
    expect(indexes("fill(0.2)+threshold(0.9)", ctx)).toEqual([0, 4, 5, 6, 7]);
    // Without the fill, the threshold alone commits position 0 only.
    expect(indexes("threshold(0.9)", ctx)).toEqual([0]);
  });

  it("the suffix runs through committed end-of-turn positions and stops at any other token", () => {
    const through = context(8, { 4: [EOS, 0.6], 5: [EOS, 0.6] }, { committed: { 6: EOS, 7: EOS } });
    expect(indexes("fill(0.5)+threshold(0.9)", through)).toEqual([4, 5]);
    const stopped = context(8, { 4: [EOS, 0.6], 5: [EOS, 0.6] }, { committed: { 6: 42 } });
    // Position 7 is masked with a non-EOS guess: no suffix. The most confident guess (4, an
    // end of turn) commits instead, and with it every masked position after it.
    expect(indexes("fill(0.5)+threshold(0.9)", stopped)).toEqual([4, 5, 7]);
  });

  it("once an end of turn is committed, every later position commits with it in the same step", () => {
    const ctx = context(8, { 3: [EOS, 0.95], 1: [30, 0.4] });
    const commits = buildPolicy("fill(0.9)+threshold(0.9)").choose(ctx);
    expect(commits).toEqual([3, 4, 5, 6, 7].map((index) => ({ index, token: EOS })));
    // An end of turn committed earlier: the later masked positions follow at once.
    const earlier = context(8, { 0: [30, 0.4] }, { committed: { 2: EOS } });
    expect(indexes("fill(1)+sequential", earlier)).toEqual([0, 3, 4, 5, 6, 7]);
  });

  it("ignores an end of turn in the prompt's tail", () => {
    const ctx = context(8, { 4: [30, 0.5] }, { committed: { 0: EOS, 1: 7 }, replyStart: 2 });
    expect(indexes("fill(0.5)+threshold(0.9)", ctx)).toEqual([4]);
  });

  it("in a sequence: the step that commits the end of turn commits the fill, and the reply ends", () => {
    const model = {
      blockSize: 8,
      maxPositions: 64,
      vocabSize: 16,
      maskTokenId: MASK,
      eosTokenId: EOS,
      padTokenId: 0,
      kvShape: { layers: 1, heads: 1, headDim: 1 },
    };
    const seq = new Sequence(model, {
      prompt: [5, 6],
      maxTokens: 100,
      policy: buildPolicy("fill(0.5)+threshold(0.9)"),
      stops: new StopMatcher([]),
      decode: (ids) => ids.join(","),
    });
    // Positions 2, 3 content (confident), 4 end of turn (confident), 5..7 flat guesses.
    const logits = new Float32Array(8 * 16);
    const set = (j: number, token: number) => {
      logits[j * 16 + token] = 12;
    };
    set(2, 7);
    set(3, 8);
    set(4, EOS);
    const out: ForwardOutputs = { logits };
    const result = seq.applyStep(out, 0, 0, 8);
    expect(seq.lastCommitted).toBe(6);
    expect(result.finished).toMatchObject({ reason: "stop", tokens: [7, 8] });
  });
});

describe("credit", () => {
  const step = (guess: Record<number, [number, number]>): Guess[] =>
    Object.entries(guess).map(([j, [token, confidence]]) => ({ index: Number(j), token, confidence }));

  it("commits a guess whose confidence summed over the steps it stayed the best reaches the bound", () => {
    const history = [step({ 2: [9, 0.5], 5: [9, 0.7] }), step({ 2: [9, 0.6], 5: [11, 0.7] })];
    // Position 2: 0.5 + 0.6 + 0.6 = 1.7 on token 9; position 5 changed token: 0.7 + 0.6.
    const ctx = context(8, { 2: [9, 0.6], 5: [11, 0.6] }, { history });
    expect(indexes("credit(bound=1.6)", ctx)).toEqual([2]);
    expect(indexes("credit(bound=1.2)", ctx)).toEqual([2, 5]);
    // With too high a bound nothing earns a commit: the most confident guess (the first on ties).
    expect(indexes("credit(bound=5)", ctx)).toEqual([2]);
  });

  it("a run broken by another token starts again", () => {
    const history = [step({ 2: [9, 0.9] }), step({ 2: [4, 0.9] })];
    expect(indexes("credit(bound=1.5)+threshold(0.95)", context(8, { 2: [9, 0.8], 3: [1, 0.85] }, { history }))).toEqual([3]);
  });

  it("with steps, a guess unchanged for that many steps commits whatever its confidence", () => {
    const history = [step({ 4: [9, 0.2] }), step({ 4: [9, 0.25] })];
    const ctx = context(8, { 4: [9, 0.3], 6: [1, 0.35] }, { history });
    expect(indexes("credit(bound=10,steps=3)", ctx)).toEqual([4]);
    expect(indexes("credit(bound=10,steps=4)", ctx)).toEqual([6]);
  });
});

describe("sub-blocks", () => {
  it("the rules see the first open sub-block only, left to right", () => {
    // Sub-blocks of 4: [0..3] has masks; position 6 is confident but waits.
    const ctx = context(8, { 1: [5, 0.95], 6: [5, 0.99] });
    expect(indexes("subblocks(4)+threshold(0.9)", ctx)).toEqual([1]);
    // The fallback picks the most confident guess of the open sub-block, not of the block.
    const low = context(8, { 2: [5, 0.5], 6: [5, 0.8] });
    expect(indexes("subblocks(4)+threshold(0.9)", low)).toEqual([2]);
  });

  it("the next sub-block opens once the previous is committed", () => {
    const ctx = context(8, { 6: [5, 0.95] }, { committed: { 0: 9, 1: 9, 2: 9, 3: 9 } });
    expect(indexes("subblocks(4)+threshold(0.9)", ctx)).toEqual([6]);
  });

  it("a later sub-block opens early when all its own guesses are confident", () => {
    const guess: Record<number, [number, number]> = { 0: [5, 0.95], 4: [5, 0.97], 5: [5, 0.96], 6: [5, 0.99], 7: [5, 0.93] };
    expect(indexes("subblocks(size=4,confident=0.9)+threshold(0.9)", context(8, guess))).toEqual([0, 4, 5, 6, 7]);
    guess[7] = [5, 0.85];
    expect(indexes("subblocks(size=4,confident=0.9)+threshold(0.8)", context(8, guess))).toEqual([0]);
  });

  it("the fill still sees the whole block (and its commits are the step's progress)", () => {
    const ctx = context(8, { 1: [5, 0.5], 6: [EOS, 0.6], 7: [EOS, 0.6] });
    expect(indexes("fill(0.5)+subblocks(4)+threshold(0.9)", ctx)).toEqual([6, 7]);
  });
});

const SPECS = [
  "threshold(0.9)",
  "threshold(1.01)",
  "sequential",
  "fill(0.5)",
  "credit(bound=1.5,steps=2)",
  "subblocks(8)+threshold(0.7)",
  "fill(0.2)+subblocks(16)+credit(bound=1.5)+threshold(0.7)",
];

describe("every policy", () => {
  it("commits at least one masked position a step, each once, on any guesses", () => {
    const guessArb = fc.record({ token: fc.integer({ min: 2, max: 9 }), confidence: fc.double({ min: 0, max: 1, noNaN: true }) });
    fc.assert(
      fc.property(
        fc.constantFrom(...SPECS),
        fc.array(fc.option(guessArb, { nil: undefined }), { minLength: 1, maxLength: 32 }),
        fc.array(fc.array(guessArb, { minLength: 32, maxLength: 32 }), { maxLength: 4 }),
        (spec, drawn, past) => {
          const slots = [...drawn];
          if (!slots.some((s) => s !== undefined)) slots[0] = { token: 5, confidence: 0.1 };
          const guess: Record<number, [number, number]> = {};
          const committed: Record<number, number> = {};
          slots.forEach((s, j) => {
            if (s === undefined) committed[j] = 7;
            else guess[j] = [s.token, s.confidence];
          });
          const history = past.map((row) =>
            row.slice(0, slots.length).flatMap((g, j) => (slots[j] === undefined ? [] : [{ index: j, ...g }])),
          );
          const ctx = context(slots.length, guess, { committed, history });
          const commits = buildPolicy(spec).choose(ctx);
          expect(commits.length).toBeGreaterThanOrEqual(1);
          const seen = new Set<number>();
          for (const c of commits) {
            expect(ctx.block.masked[c.index]).toBe(true);
            expect(seen.has(c.index)).toBe(false);
            seen.add(c.index);
          }
          // Pure: the same context gives the same answer.
          expect(buildPolicy(spec).choose(ctx)).toEqual(commits);
        },
      ),
      { numRuns: 400 },
    );
  });
});

describe("policy specs", () => {
  it("spells every knob out, in a stable label", () => {
    expect(buildPolicy("threshold").name).toBe("threshold(confidence=0.9)");
    expect(buildPolicy("threshold", { threshold: 0.8 }).name).toBe("threshold(confidence=0.8)");
    expect(buildPolicy(" fill( 0.3 ) + credit(steps=2) ").name).toBe("fill(confidence=0.3)+credit(bound=2,steps=2)");
    expect(buildPolicy("credit(steps=2)+fill(0.3)").name).toBe(buildPolicy("fill(0.3)+credit(steps=2)").name);
    expect(parsePolicySpec("subblocks(8, confident=0.8)")).toEqual([{ name: "subblocks", knobs: { size: 8, confident: 0.8 } }]);
  });

  it.each([
    ["", /empty spec/],
    ["greedy", /unknown "greedy"/],
    ["threshold(2)", /threshold.confidence must be a number in \[0, 1.01\]/],
    ["threshold(x)", /got "x"/],
    ["subblocks(2.5)", /subblocks.size must be an integer/],
    ["credit(speed=2)", /credit has no knob "speed"/],
    ["sequential(1)", /sequential has no knob at position 1/],
    ["fill+fill", /"fill" given twice/],
    ["threshold+", /empty component/],
    ["threshold(0.9", /cannot read/],
  ])("refuses %j with a message naming the problem", (spec, message) => {
    expect(() => buildPolicy(spec)).toThrow(message);
  });
});
