// The grammar inside a Sequence, with logits written by the test and a grammar whose whole
// language is known: jump-forward before a forward, guesses under the grammar, the end of
// turn only where the grammar ends, the free thinking span and the constraint opening after
// it, and a dead end.
import { describe, expect, it } from "vitest";
import type { ForwardOutputs } from "../decoder/forward.js";
import { buildPolicy } from "../decoder/policies/registry.js";
import { StopMatcher } from "../decoder/reply-text.js";
import { type DecodeModel, Sequence } from "../decoder/sequence.js";
import type { GrammarState } from "./frontier-rule.js";
import { localSequenceGrammar } from "./local-grammar.js";

const V = 16;
const MASK = 15;
const PAD = 13;
const EOS = 14;
const THINK_END = 12; // "m" plays </think>
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
const letter = (i: number) => String.fromCharCode(97 + i);
const decode = (ids: readonly number[]) => ids.map((i) => (i === EOS ? "$" : letter(i))).join("");
const encode = (text: string) => [...text].map((c) => c.charCodeAt(0) - 97);

/** A grammar given by its finite language over the letters a..m (one token per letter). */
class LanguageState implements GrammarState {
  text = "";
  ended = false;
  accepted: number[] = [];
  disposed = false;
  constructor(private readonly lang: readonly string[]) {}
  private allows(t: number): boolean {
    if (this.ended || t === MASK || t === PAD) return false;
    if (t === EOS) return this.lang.includes(this.text);
    return this.lang.some((s) => s.startsWith(this.text + letter(t)));
  }
  async allowed(): Promise<Int32Array> {
    const mask = new Int32Array(1);
    for (let v = 0; v < V; v++) if (this.allows(v)) mask[0]! |= 1 << v;
    return mask;
  }
  accept(t: number): boolean {
    if (!this.allows(t)) return false;
    this.accepted.push(t);
    if (t === EOS) this.ended = true;
    else this.text += letter(t);
    return true;
  }
  forcedText(): string {
    const rest = this.lang.filter((s) => s.startsWith(this.text)).map((s) => s.slice(this.text.length));
    if (this.ended || rest.includes("")) return "";
    let common = rest[0]!;
    for (const r of rest) while (!r.startsWith(common)) common = common.slice(0, -1);
    return common;
  }
  terminated(): boolean {
    return this.ended;
  }
  dispose(): void {
    this.disposed = true;
  }
}

type Plan = Record<number, [token: number, logit: number]>;

/** One forward's logits: block position j gets `logit` on its planned token, 0 elsewhere. */
function forward(seq: Sequence, plan: Plan): { out: ForwardOutputs; past: number; seq: number } {
  const S = seq.stepTokens().length;
  const blockOffset = seq.commitsBlock ? BLOCK : 0;
  const logits = new Float32Array(S * V);
  for (const [j, [token, logit]] of Object.entries(plan)) logits[(blockOffset + Number(j)) * V + token] = logit;
  const present = new Float32Array(seq.kv.length + S).map((_, i) => i);
  return { out: { logits, present: [{ key: present, value: present }] }, past: seq.kv.length, seq: S };
}

async function step(seq: Sequence, plan: Plan) {
  const before = await seq.prepareStep();
  if (before.finished !== undefined) return before;
  const f = forward(seq, plan);
  await seq.constrainStep(f.out, 0, f.seq);
  return seq.applyStep(f.out, 0, f.past, f.seq);
}

function sequence(state: LanguageState, options: { prompt?: number[]; freeUntil?: number; threshold?: number } = {}) {
  return new Sequence(MODEL, {
    prompt: options.prompt ?? [0, 1],
    maxTokens: 40,
    policy: buildPolicy("threshold(0.9)"),
    stops: new StopMatcher([]),
    decode,
    grammar: localSequenceGrammar(state, encode, { threshold: options.threshold ?? 0.9, vocab: V, banned: [MASK, PAD] }, options.freeUntil),
  });
}

const SURE = 20; // a logit that makes its token's probability ~1
const block = (seq: Sequence) => seq.currentBlock();

describe("a Sequence under a grammar", () => {
  it("commits forced text before the forward, the best allowed guess, and the forced end of turn", async () => {
    const state = new LanguageState(["cdefg", "cdefh"]);
    const seq = sequence(state);
    // Before the forward: "cdef" is forced after the prompt's tail "ab".
    expect((await seq.prepareStep()).finished).toBeUndefined();
    expect(decode(block(seq).tokens.slice(2, 6))).toBe("cdef");
    expect(block(seq).masked).toEqual([false, false, false, false, false, false, true, true]);
    // The model prefers "a", which the grammar refuses; the best allowed is "h". Then the end
    // of turn is the only continuation: committed without reading the logits.
    const f = forward(seq, { 6: [0, SURE], 7: [3, SURE] });
    f.out.logits![6 * V + 7] = 3;
    await seq.constrainStep(f.out, 0, f.seq);
    const result = seq.applyStep(f.out, 0, f.past, f.seq);
    expect(result.finished).toMatchObject({ reason: "stop", text: "cdefh", grammar: { forced: 5, tokens: 6, steps: 1, deadEnd: false } });
    expect(state.accepted.at(-1)).toBe(EOS);
  });

  it("commits a run from the frontier while the guesses reach the threshold, the first one always", async () => {
    const lang = ["aaa", "aab", "aba", "abb", "baa", "bab", "bba", "bbb"];
    const seq = sequence(new LanguageState(lang), { prompt: [2] });
    // Position 1: "a" at ~1; position 2: "b" at e/(1+e) = 0.73 < 0.9: the run stops after one.
    let r = await step(seq, { 1: [0, SURE], 2: [1, 1], 3: [0, SURE] });
    expect(r.finished).toBeUndefined();
    expect(block(seq).masked.slice(1, 4)).toEqual([false, true, true]);
    // Next step: the first guess is committed below the threshold, and after it only forced
    // text: "a" at ~1 waits for the next step.
    r = await step(seq, { 2: [1, 1], 3: [0, SURE] });
    expect(r.finished).toBeUndefined();
    expect(block(seq).masked.slice(1, 4)).toEqual([false, false, true]);
    // Then "a", and the end of turn, forced.
    r = await step(seq, { 3: [0, SURE] });
    expect(r.finished).toMatchObject({ reason: "stop", text: "aba" });
  });

  it("never commits the end of turn where the grammar cannot end", async () => {
    // The model wants to stop at once; the grammar needs three letters first ("a" forced, then
    // the best allowed guess, the rest forced), and ends the reply only then.
    const seq = sequence(new LanguageState(["aab", "abb"]), { prompt: [2] });
    const r = await step(seq, { 1: [EOS, SURE], 2: [EOS, SURE], 3: [EOS, SURE] });
    expect(r.finished).toMatchObject({ reason: "stop", text: "aab" });
  });

  it("thinks freely, then opens the grammar after </think> and masks again what it refuses", async () => {
    const state = new LanguageState(["ab"]);
    const seq = sequence(state, { prompt: [6], freeUntil: THINK_END });
    expect(seq.wantsLogits).toBe(false);
    // Free step (the policy): "c", </think>, "a", "d" all confident. What follows </think> is
    // masked again and handed to the grammar.
    let r = await step(seq, { 1: [2, SURE], 2: [THINK_END, SURE], 3: [0, SURE], 4: [3, SURE] });
    expect(r.finished).toBeUndefined();
    expect(block(seq).masked).toEqual([false, false, false, true, true, true, true, true]);
    expect(seq.wantsLogits).toBe(true);
    // Before the next forward the grammar takes "a" back and refuses "d"; "b" and the end are
    // forced: the reply ends before any forward.
    r = await seq.prepareStep();
    expect(state.accepted).toEqual([0, 1, EOS]);
    expect(r.finished).toMatchObject({ reason: "stop", text: "cmab", grammar: { tokens: 3, forced: 2 } });
  });

  it("an end of turn while thinking becomes </think>", async () => {
    const seq = sequence(new LanguageState(["ab", "ba"]), { prompt: [6], freeUntil: THINK_END });
    const r = await step(seq, { 1: [EOS, SURE] });
    expect(r.finished).toBeUndefined();
    expect(block(seq).tokens[1]).toBe(THINK_END);
    expect(seq.wantsLogits).toBe(true);
  });

  it("a dead end ends the reply with what is committed", async () => {
    class Stuck extends LanguageState {
      override async allowed(): Promise<Int32Array> {
        return this.text === "" ? super.allowed() : new Int32Array(1);
      }
    }
    const state = new Stuck(["ab", "ac"]);
    const seq = sequence(state, { prompt: [6] });
    const r = await step(seq, { 1: [0, SURE] });
    expect(r.finished).toMatchObject({ reason: "stop", text: "a", grammar: { deadEnd: true } });
    seq.release();
    expect(state.disposed).toBe(true);
  });
});
