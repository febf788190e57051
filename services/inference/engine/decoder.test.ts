// The decode rules of docs/architecture.md §5 on one sequence, with logits written by the test: the
// confidence threshold, the at-least-one rule, end of turn once nothing before it is masked,
// max_tokens and the context with overshoot trimmed, stop sequences across a block boundary,
// the fused commit of a finished block.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BLOCKED, BatchBuilder } from "../decoder/batch.js";
import type { ForwardOutputs, LayerKV } from "../decoder/forward.js";
import { SequenceKV } from "../decoder/kv-cache.js";
import { ReplyText, StopMatcher, withoutIncompleteTail } from "../decoder/reply-text.js";
import { Sequence, type DecodeModel, type StepResult } from "../decoder/sequence.js";
import { buildPolicy } from "../decoder/policies/registry.js";
import { bannedTokens } from "../core/banned-tokens.js";
import { guessAt, guessWithTop } from "../decoder/unmask.js";

const V = 16;
const MASK = 15;
const PAD = 13;
const EOS = 14;
const BLOCK = 8;
const MODEL: DecodeModel = {
  blockSize: BLOCK,
  maxPositions: 64,
  vocabSize: V,
  maskTokenId: MASK,
  eosTokenId: EOS,
  padTokenId: PAD,
  kvShape: { layers: 1, heads: 1, headDim: 1 },
};
/** Tokens 0..12 are the letters a..m; EOS prints as "$". */
const decode = (ids: readonly number[]) => ids.map((i) => (i === EOS ? "$" : String.fromCharCode(97 + i))).join("");
const ALLOWED = V - 2; // mask and pad are never chosen

/** The logit that gives `token` probability `confidence` when every other logit is 0. */
function logitFor(confidence: number): number {
  return Math.log((confidence * (ALLOWED - 1)) / (1 - confidence));
}

type Plan = Record<number, [token: number, confidence: number]>;

/**
 * One forward for a lone sequence: block position j gets the planned token and confidence,
 * every other position flat logits (confidence 1/14, token 0 on the tie).
 */
function forward(seq: Sequence, plan: Plan): { out: ForwardOutputs; past: number; seq: number } {
  const tokens = seq.stepTokens();
  const S = tokens.length;
  const blockOffset = seq.commitsBlock ? BLOCK : 0;
  const logits = new Float32Array(S * V);
  for (const [j, [token, confidence]] of Object.entries(plan)) {
    logits[(blockOffset + Number(j)) * V + token] = logitFor(confidence);
  }
  const past = seq.kv.length;
  const present = new Float32Array(past + S).map((_, i) => i);
  return { out: { logits, present: [{ key: present, value: present }] }, past, seq: S };
}

function step(seq: Sequence, plan: Plan): StepResult {
  const f = forward(seq, plan);
  return seq.applyStep(f.out, 0, f.past, f.seq);
}

function sequence(prompt: number[], maxTokens: number, options: { policy?: string; stop?: string[]; model?: DecodeModel } = {}) {
  const seq = new Sequence(options.model ?? MODEL, {
    prompt,
    maxTokens,
    policy: buildPolicy(options.policy ?? "threshold(0.9)"),
    stops: new StopMatcher(options.stop ?? []),
    decode,
  });
  while (!seq.prefilled) {
    const tokens = seq.prefillChunk(64);
    const present = new Float32Array(seq.kv.length + tokens.length);
    seq.applyPrefill(
      { logits: new Float32Array(0), present: [{ key: present, value: present }] },
      0,
      seq.kv.length,
      tokens.length,
      tokens.length,
    );
  }
  return seq;
}

describe("unmasking rule", () => {
  it("commits every position at or above the threshold and nothing else", () => {
    const seq = sequence([1, 2], 100);
    step(seq, { 2: [3, 0.95], 3: [4, 0.9], 4: [5, 0.89], 7: [6, 0.99] });
    const block = seq.currentBlock();
    expect(block.tokens.slice(0, 2)).toEqual([1, 2]); // the prompt's tail, never masked
    expect(block.masked).toEqual([false, false, false, false, true, true, true, false]);
    expect(block.tokens[2]).toBe(3);
    expect(block.tokens[3]).toBe(4);
    expect(block.tokens[7]).toBe(6);
  });

  it("commits the single most confident position when none reaches the threshold", () => {
    const seq = sequence([1, 2], 100);
    step(seq, { 2: [3, 0.5], 5: [6, 0.6], 6: [7, 0.59] });
    expect(seq.currentBlock().masked).toEqual([false, false, true, true, true, false, true, true]);
    expect(seq.currentBlock().tokens[5]).toBe(6);
  });

  it("breaks ties by the first position and the lowest token id", () => {
    const logits = new Float32Array(2 * V);
    const banned = bannedTokens(V, [MASK, PAD]);
    const guesses = [guessAt(logits, 0, V, banned, 0), guessAt(logits, V, V, banned, 1)];
    expect(guesses[0]!.token).toBe(0);
    expect(guesses[0]!.confidence).toBeCloseTo(1 / ALLOWED, 12);
    const seq = sequence([1, 2], 100);
    step(seq, {});
    expect(seq.currentBlock().masked).toEqual([false, false, false, true, true, true, true, true]);
    expect(seq.currentBlock().tokens[2]).toBe(0);
  });

  it("never chooses the mask or pad token, and leaves them out of the softmax", () => {
    const logits = new Float32Array(V);
    logits[MASK] = 50;
    logits[PAD] = 40;
    logits[3] = logitFor(0.95);
    const g = guessAt(logits, 0, V, bannedTokens(V, [MASK, PAD]), 0);
    expect(g.token).toBe(3);
    expect(g.confidence).toBeCloseTo(0.95, 6);
  });

  it("the top-k list agrees with the greedy guess on any logits", () => {
    const vocab = 24;
    const banned = bannedTokens(vocab, [3, 7]);
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: -20, max: 20, noNaN: true }), { minLength: vocab, maxLength: vocab }),
        fc.integer({ min: 1, max: 6 }),
        (values, k) => {
          const logits = Float32Array.from(values);
          const g = guessWithTop(logits, 0, vocab, banned, 5, k);
          expect(g).toMatchObject(guessAt(logits, 0, vocab, banned, 5));
          expect(g.top).toHaveLength(k);
          expect(g.top![0]).toEqual({ token: g.token, probability: expect.closeTo(g.confidence, 9) });
          const allowed = [...values.keys()].filter((v) => banned[v] === 0);
          const sorted = allowed.sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, k);
          expect(g.top!.map((t) => t.token)).toEqual(sorted);
          for (let i = 1; i < k; i++) expect(g.top![i]!.probability).toBeLessThanOrEqual(g.top![i - 1]!.probability);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("with a threshold above 1 commits exactly one position per step", () => {
    const seq = sequence([1, 2], 100, { policy: "threshold(1.01)" });
    step(seq, { 2: [3, 0.999], 3: [4, 0.9999], 4: [5, 0.99] });
    expect(seq.currentBlock().masked.filter((m) => !m)).toHaveLength(3);
    expect(seq.currentBlock().tokens[3]).toBe(4);
  });
});

describe("end of a reply", () => {
  it("stops at the end of turn only once nothing before it is masked, and trims it", () => {
    const seq = sequence([1, 2], 100);
    expect(step(seq, { 4: [EOS, 0.99] })).toEqual({});
    expect(seq.done).toBe(false);
    const result = step(seq, { 2: [3, 0.99], 3: [4, 0.99] });
    expect(result.finished).toMatchObject({ reason: "stop", completionTokens: 2, tokens: [3, 4], text: "de" });
    expect(result.finished!.last.text).toBe("de");
  });

  it("ends at max_tokens inside a block and trims the overshoot", () => {
    const seq = sequence([1, 2], 3);
    const plan: Plan = {};
    for (let j = 2; j < BLOCK; j++) plan[j] = [j, 0.99];
    const result = step(seq, plan);
    expect(result.finished).toMatchObject({ reason: "length", completionTokens: 3, tokens: [2, 3, 4], text: "cde" });
  });

  it("needs only the positions before max_tokens: later ones may stay masked", () => {
    const seq = sequence([1, 2], 2);
    const result = step(seq, { 2: [5, 0.99], 3: [6, 0.99] });
    expect(result.finished).toMatchObject({ reason: "length", tokens: [5, 6] });
  });

  it("an end of turn at or after max_tokens is a length finish", () => {
    const seq = sequence([1, 2], 2);
    const result = step(seq, { 2: [5, 0.99], 3: [6, 0.99], 4: [EOS, 0.99] });
    expect(result.finished).toMatchObject({ reason: "length", completionTokens: 2 });
  });

  it("ends with length when the context is full", () => {
    const small: DecodeModel = { ...MODEL, maxPositions: 12 };
    const seq = sequence([1, 2], 10, { model: small });
    const fill = (from: number, to: number) => {
      const plan: Plan = {};
      for (let j = from; j < to; j++) plan[j] = [j % 10, 0.99];
      return plan;
    };
    expect(step(seq, fill(2, 8)).block).toEqual({ blockIndex: 0, text: "cdefgh", replyTokens: 6 });
    // The last block is cut at the context: 4 positions.
    expect(seq.currentBlock().tokens).toHaveLength(4);
    const result = step(seq, fill(0, 4));
    expect(result.finished).toMatchObject({ reason: "length", completionTokens: 10 });
    expect(result.finished!.text).toBe("cdefghabcd");
  });
});

describe("blocks", () => {
  it("writes a finished block's KV in the forward that starts the next block", () => {
    const seq = sequence([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 100);
    expect(seq.promptBlocks).toBe(8);
    expect(seq.kv.length).toBe(8);
    const plan: Plan = {};
    for (let j = 2; j < BLOCK; j++) plan[j] = [j, 0.99];
    const result = step(seq, plan);
    expect(result.block).toEqual({ blockIndex: 0, text: "cdefgh", replyTokens: 6 });
    expect(seq.commitsBlock).toBe(true);
    const row = seq.stepTokens();
    expect(row).toHaveLength(2 * BLOCK);
    expect(row.slice(0, BLOCK)).toEqual([9, 10, 2, 3, 4, 5, 6, 7]);
    expect(row.slice(BLOCK)).toEqual(new Array(BLOCK).fill(MASK));
    step(seq, { 0: [1, 0.99] });
    expect(seq.kv.length).toBe(16);
    expect(seq.commitsBlock).toBe(false);
    expect(seq.stepTokens()).toHaveLength(BLOCK);
    expect(seq.currentBlock().start).toBe(16);
  });

  it("a prompt of whole blocks starts a fully masked block", () => {
    const seq = sequence([1, 2, 3, 4, 5, 6, 7, 8], 100);
    expect(seq.kv.length).toBe(8);
    expect(seq.currentBlock()).toMatchObject({ start: 8, masked: new Array(BLOCK).fill(true) });
  });
});

describe("stop sequences", () => {
  // Reply "cdefgh" in block 0, then "ijkl…" in block 1; "ghi" spans the boundary.
  function run(stop: string[]) {
    const seq = sequence([1, 2], 100, { stop });
    const first: Plan = {};
    for (let j = 2; j < BLOCK; j++) first[j] = [j, 0.99];
    const a = step(seq, first);
    const b = step(seq, { 0: [8, 0.99], 1: [9, 0.99], 2: [10, 0.99] });
    return { a, b };
  }

  it("finds a stop sequence across a block boundary, holds its start back, and trims it", () => {
    const { a, b } = run(["ghi"]);
    expect(a.block).toEqual({ blockIndex: 0, text: "cdef", replyTokens: 6 });
    expect(b.finished).toMatchObject({ reason: "stop", text: "cdef", completionTokens: 4 });
    expect(b.finished!.last.text).toBe("");
  });

  it("sends held-back text once it cannot be a stop sequence", () => {
    const { a, b } = run(["ghz"]);
    expect(a.block!.text).toBe("cdef");
    expect(b.finished).toBeUndefined();
  });

  it("counts the tokens of the returned text only", () => {
    const { b } = run(["hij"]);
    expect(b.finished).toMatchObject({ reason: "stop", text: "cdefg", completionTokens: 5 });
  });

  it("holds back an unfinished UTF-8 character", () => {
    expect(withoutIncompleteTail("ab\uFFFD\uFFFD")).toBe("ab");
    const text = new ReplyText((ids) => (ids.length === 1 ? "x\uFFFD" : "xé"), new StopMatcher([]));
    expect(text.blockDelta([1])).toBe("x");
    expect(text.blockDelta([1, 2])).toBe("é");
    expect(text.finalDelta("xé!")).toBe("!");
  });

  it("matches the earliest stop sequence", () => {
    const stops = new StopMatcher(["cd", "b", ""]);
    expect(stops.find("abcd")).toEqual({ start: 1, end: 2 });
    expect(stops.pendingLength("xxc")).toBe(1);
    expect(stops.empty).toBe(false);
    expect(new StopMatcher([""]).empty).toBe(true);
  });
});

describe("batch inputs", () => {
  it("pads rows to a common P and S and masks block-causally by absolute position", () => {
    const shape = { layers: 1, heads: 1, headDim: 1 };
    const a = new SequenceKV(shape);
    const present = new Float32Array(8).fill(1);
    a.append([{ key: present, value: present }], 0, 8, 0, 8); // 8 past slots
    const b = new SequenceKV(shape);
    const builder = new BatchBuilder(shape, 4, PAD);
    const inputs = builder.build([
      { kv: a, tokens: [1, 2] },
      { kv: b, tokens: [3, 4, 5, 6, 7] },
    ]);
    expect(inputs).toMatchObject({ batch: 2, seq: 5, past: 8 });
    expect([...inputs.inputIds].map(Number)).toEqual([1, 2, PAD, PAD, PAD, 3, 4, 5, 6, 7]);
    expect([...inputs.positionIds].map(Number)).toEqual([8, 9, 0, 0, 0, 0, 1, 2, 3, 4]);
    const width = 13;
    const row = (r: number, i: number) =>
      [...inputs.attentionMask.subarray((r * 5 + i) * width, (r * 5 + i + 1) * width)].map((x) => (x === 0 ? 1 : 0));
    // Row a: 8 past slots, its 2 tokens (one block), padding blocked.
    expect(row(0, 0)).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
    expect(row(0, 2)).toEqual(new Array(width).fill(0));
    // Row b: no past; positions 0..3 are block 0, position 4 is block 1.
    expect(row(1, 0)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]);
    expect(row(1, 4)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    expect(inputs.attentionMask.every((x) => x === 0 || x === BLOCKED)).toBe(true);
    expect([...(inputs.pastKeyValues as LayerKV[])[0]!.key]).toEqual([...new Array(8).fill(1), ...new Array(8).fill(0)]);
  });

  it("patches the kept past in place when a row commits and the longest past is unchanged", () => {
    const shape = { layers: 1, heads: 1, headDim: 1 };
    const a = new SequenceKV(shape);
    const b = new SequenceKV(shape);
    const ones = new Float32Array(8).fill(1);
    a.append([{ key: ones, value: ones }], 0, 8, 0, 8);
    const builder = new BatchBuilder(shape, 4, PAD);
    const first = builder.build([
      { kv: a, tokens: [1] },
      { kv: b, tokens: [2] },
    ]);
    const twos = new Float32Array(4).fill(2);
    b.append([{ key: twos, value: twos }], 0, 4, 0, 4);
    const second = builder.build([
      { kv: a, tokens: [1] },
      { kv: b, tokens: [2] },
    ]);
    expect((second.pastKeyValues as LayerKV[])[0]!.key).toBe((first.pastKeyValues as LayerKV[])[0]!.key);
    expect([...(second.pastKeyValues as LayerKV[])[0]!.key]).toEqual([...new Array(8).fill(1), 2, 2, 2, 2, 0, 0, 0, 0]);
    expect(second.attentionMask).not.toBe(first.attentionMask);
  });
});
