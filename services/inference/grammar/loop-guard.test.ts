// The loop guard and the length budgets (loop-guard.ts) on constructed logits, through the
// frontier rule and XGrammar's matcher over a small vocabulary: a model that always wants to
// repeat (or to go on) ends its value with the guard, and never without it.
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SPECIAL_TOKENS } from "../core/model-config.js";
import { grammarSource } from "./grammar-spec.js";
import { MatcherState } from "./matcher-state.js";
import { JsonTracker } from "./json-tracker.js";
import { localSequenceGrammar } from "./local-grammar.js";
import { type FinishRules, repeatingContinuation, replyPressure, ValueGuard } from "./loop-guard.js";
import { loadXGrammar, type GrammarCompiler, type XGrammar } from "./xgrammar.js";

const WORDS = ["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr", "st", "uv"];
const PUNCT = ['{"x": "', '"', '"}', "}", "[", "]", ", ", "1", "2", "{", "x", ":", " "];
const VOCAB = [...WORDS, ...PUNCT, "</s>"];
const EOS = VOCAB.length - 1;
const id = (t: string) => VOCAB.indexOf(t);
const bytes = VOCAB.map((t, i) => (i === EOS ? new Uint8Array() : new TextEncoder().encode(t)));
/** Greedy longest match (forced text). */
const encode = (text: string) => {
  const out: number[] = [];
  for (let i = 0; i < text.length; ) {
    const best = VOCAB.filter((t, v) => v !== EOS && text.startsWith(t, i)).sort((a, b) => b.length - a.length)[0]!;
    out.push(id(best));
    i += best.length;
  }
  return out;
};

let xg: XGrammar;
let compiler: GrammarCompiler;
beforeAll(async () => {
  xg = await loadXGrammar();
  const info = await xg.TokenizerInfo.createTokenizerInfo(VOCAB, "raw", false, VOCAB.length, [EOS]);
  compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
});

const OFF: FinishRules = { loopRepeats: 0, stringBudget: 0, itemBudget: 0, freeText: false };

/**
 * Decodes `schema` one guessed token per step under the logits `want(committed)` gives (a
 * logit per token), up to `limit` tokens (the reply's max_tokens, given to the guard with
 * `maxTokens`); the committed text and whether the reply ended.
 */
async function decode(
  schema: object,
  rules: FinishRules,
  want: (committed: number[]) => Record<string, number>,
  limit = 300,
  maxTokens?: number,
) {
  const ebnf = await xg.Testings._jsonSchemaToEBNF(JSON.stringify(schema), false, -1, [", ", ": "], true);
  const compiled = await compiler.compileGrammar(ebnf);
  const state = new MatcherState(await xg.GrammarMatcher.createGrammarMatcher(compiled, [EOS], false, -1));
  const guard = ValueGuard.active(rules) ? new ValueGuard(rules, "json", bytes, "<tool_call>", maxTokens) : undefined;
  const grammar = localSequenceGrammar(state, encode, { threshold: 0.9, vocab: VOCAB.length, banned: [] }, undefined, guard);
  const committed: number[] = [];
  let loops = 0;
  let budget = 0;
  while (committed.length < limit && !committed.includes(EOS)) {
    const logits = new Float32Array(VOCAB.length).fill(-20);
    for (const [t, x] of Object.entries(want(committed))) logits[id(t)] = x;
    const commit = await grammar.step(logits, [0]);
    committed.push(...commit.tokens);
    loops += commit.guarded?.loops ?? 0;
    budget += commit.guarded?.budget ?? 0;
  }
  grammar.dispose();
  compiled.dispose();
  const text = committed.map((t) => (t === EOS ? "" : VOCAB[t])).join("");
  return { text, ended: committed.includes(EOS), tokens: committed.length, loops, budget };
}

const STRING = { type: "object", properties: { x: { type: "string" } }, required: ["x"], additionalProperties: false };

describe("loop guard", () => {
  it("finds the unit a tail repeats, only past 8 tokens and the repeat count, inside the value", () => {
    expect(repeatingContinuation([1, 1, 1, 1, 1, 1, 1], 0, 4)).toBeUndefined();
    expect(repeatingContinuation([1, 1, 1, 1, 1, 1, 1, 1], 0, 4)).toBe(1);
    expect(repeatingContinuation([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3], 0, 4)).toBe(1);
    expect(repeatingContinuation([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3], 2, 4)).toBeUndefined();
    expect(repeatingContinuation([5, 6, 5, 6, 5, 6, 5, 6, 5], 0, 4)).toBe(6);
    expect(repeatingContinuation([1, 2, 3, 4, 5, 6, 7, 8, 9], 0, 4)).toBeUndefined();
  });

  it("follows strings, arrays, objects and numbers, and a call's value after its open tag", () => {
    const tags = ["<tool_call>", ...VOCAB];
    const tagBytes = tags.map((t) => new TextEncoder().encode(t));
    const tracker = new JsonTracker("free", tagBytes, "<tool_call>");
    const push = (...texts: string[]) => {
      for (const t of texts) tracker.push(tags.indexOf(t));
    };
    push("ab", "{");
    expect(tracker.mode).toBe("free");
    push("<tool_call>", '{"x": "', "ab");
    expect(tracker.frames.map((f) => f.kind)).toEqual(["object", "string"]);
    push('"', ", ", "[", "1", ", ");
    expect(tracker.frames.map((f) => f.kind)).toEqual(["object", "array"]);
    expect(tracker.innermost?.commas).toBe(1);
    push("2", "]", "}");
    expect(tracker.mode).toBe("free");
  });

  it("a Gemma 4 call's head (`call:NAME`, digits and dashes in the name) is not JSON: the arguments object is the value", () => {
    const texts = ["call:get-v2", "{", '{"x": "', "ab", '"', "}", "</s>"];
    const tracker = new JsonTracker(
      "json",
      texts.map((t) => new TextEncoder().encode(t)),
      "<|tool_call>",
      "after",
      true,
    );
    tracker.push(0);
    expect(tracker.mode).toBe("json");
    expect(tracker.frames).toEqual([]);
    tracker.push(2);
    tracker.push(3);
    expect(tracker.frames.map((f) => f.kind)).toEqual(["object", "string"]);
    tracker.push(4);
    tracker.push(5);
    expect(tracker.mode).toBe("after");
  });

  it("a model that repeats one word forever ends the string with the guard, and loops without it", async () => {
    const want = () => ({ ab: 10, cd: 9, '"}': 0, '"': 0 });
    const before = await decode(STRING, OFF, want, 200);
    expect(before.ended).toBe(false);
    expect(before.text).toMatch(/^\{"x": "(ab)+$/);
    const after = await decode(STRING, { ...OFF, loopRepeats: 4 }, want);
    expect(after.ended).toBe(true);
    expect(JSON.parse(after.text)).toEqual({ x: expect.any(String) });
    expect(after.loops).toBeGreaterThan(0);
    expect(after.tokens).toBeLessThan(60);
  });

  it("a model that repeats a three-word phrase ends the string", async () => {
    const cycle = ["ab", "cd", "ef"];
    const want = (committed: number[]) => ({ [cycle[committed.length % 3]!]: 10, gh: 8, '"}': 0 });
    const after = await decode(STRING, { ...OFF, loopRepeats: 4 }, want);
    expect(after.ended).toBe(true);
    expect(after.loops).toBeGreaterThan(0);
    expect(after.tokens).toBeLessThan(80);
  });

  it("past the string budget closing is favoured until it wins", async () => {
    // Eleven different words in turn: no unit of ≤ 8 tokens repeats, so only the budget ends it.
    const want = (committed: number[]) => ({ [WORDS[committed.length % WORDS.length]!]: 10, '"}': 0 });
    const before = await decode(STRING, OFF, want, 200);
    expect(before.ended).toBe(false);
    const after = await decode(STRING, { ...OFF, loopRepeats: 4, stringBudget: 16 }, want);
    expect(after.ended).toBe(true);
    expect(after.budget).toBe(1);
    // 16 tokens, then 0.5 logit per token: the closing quote wins 20 tokens past the budget.
    expect(after.tokens).toBeGreaterThan(16 + 20);
    expect(after.tokens).toBeLessThan(16 + 30);
  });

  it("past the item budget an array is closed", async () => {
    const schema = { type: "array", items: { enum: [1, 2] } };
    const want = (committed: number[]) => ({ [committed.length % 4 < 2 ? "1" : "2"]: 10, ", ": 10, "]": 0 });
    const before = await decode(schema, OFF, want, 200);
    expect(before.ended).toBe(false);
    const after = await decode(schema, { ...OFF, itemBudget: 8 }, want);
    expect(after.ended).toBe(true);
    const items = JSON.parse(after.text) as number[];
    // 8 items, then 2 logits per item: `]` wins at the sixth item past the budget.
    expect(items.length).toBe(8 + 5);
  });

  it("a guard whose rules are all off is not installed, and a free-text reply is left alone by default", () => {
    expect(ValueGuard.active(OFF)).toBe(false);
    const guard = new ValueGuard({ ...OFF, loopRepeats: 4 }, "free", bytes, "<tool_call>");
    for (let i = 0; i < 12; i++) guard.committed(id("ab"));
    expect(guard.steering()).toBeUndefined();
    const free = new ValueGuard({ ...OFF, loopRepeats: 4, freeText: true }, "free", bytes, "<tool_call>");
    for (let i = 0; i < 12; i++) free.committed(id("ab"));
    expect(free.steering()).toMatchObject({ ban: id("ab") });
  });

  it("a model that writes digits for ever stops at the integer bound, and the end of turn follows in the same step", async () => {
    const source = await grammarSource(
      { kind: "json_schema", schema: { type: "integer" } },
      (...args) => xg.Testings._jsonSchemaToEBNF(...args),
      DEFAULT_SPECIAL_TOKENS,
    );
    const compiled = await compiler.compileGrammar((source as { ebnf: string }).ebnf);
    const state = new MatcherState(await xg.GrammarMatcher.createGrammarMatcher(compiled, [EOS], false, -1));
    const grammar = localSequenceGrammar(state, encode, { threshold: 0.5, vocab: VOCAB.length, banned: [] });
    const rows = 24;
    const logits = new Float32Array(rows * VOCAB.length).fill(-20);
    for (let r = 0; r < rows; r++) logits[r * VOCAB.length + id("1")] = 10;
    const commit = await grammar.step(
      logits,
      Array.from({ length: rows }, (_, r) => r * VOCAB.length),
    );
    expect(commit.tokens.map((t) => (t === EOS ? "$" : VOCAB[t])).join("")).toBe(`${"1".repeat(16)}$`);
    grammar.dispose();
    compiled.dispose();
  });
});

describe("reply budget", () => {
  it("is nothing until the last quarter before the reserve, then ramps, and is decisive within the reserve", () => {
    expect(replyPressure(1024, 0, 3)).toEqual({ bonus: 0, decisive: false });
    expect(replyPressure(1024, 1024 - 50 - 256, 3)).toEqual({ bonus: 0, decisive: false });
    const early = replyPressure(1024, 1024 - 50 - 192, 3);
    const late = replyPressure(1024, 1024 - 50 - 64, 3);
    expect(early.bonus).toBeGreaterThan(0);
    expect(late.bonus).toBeGreaterThan(early.bonus);
    expect(late.decisive).toBe(false);
    expect(replyPressure(1024, 1024 - 50, 3).decisive).toBe(true);
    // A small max_tokens keeps a reserve of at most a quarter of it.
    expect(replyPressure(24, 17, 5).decisive).toBe(false);
    expect(replyPressure(24, 18, 5).decisive).toBe(true);
  });

  // Nested values with required members; the model writes eleven different words in turn (no
  // repeat for the loop guard, and under the string budget) and never wants to close anything.
  const NESTED = {
    type: "object",
    properties: {
      ab: { type: "string" },
      cd: { type: "array", items: { type: "string" } },
      ef: { type: "object", properties: { gh: { type: "string" } }, required: ["gh"], additionalProperties: false },
    },
    required: ["ab", "cd", "ef"],
    additionalProperties: false,
  };
  const ANY_OBJECT = { type: "object" };
  const ramble = (committed: number[]) => ({ [WORDS[committed.length % WORDS.length]!]: 10, ", ": 3 });
  const RULES: FinishRules = { loopRepeats: 4, stringBudget: 256, itemBudget: 64, freeText: false, replyBudget: true };

  for (const [name, schema] of [
    ["nested required members", NESTED],
    ["any object", ANY_OBJECT],
  ] as const) {
    it(`a model forced to ramble ends with a complete value before a small max_tokens (${name})`, async () => {
      // The reserve (32 + 6 per open value, at most a quarter of max_tokens) must hold the rest:
      // 25 of this vocabulary's short tokens for the nested schema's missing members.
      for (const maxTokens of [120, 200]) {
        const before = await decode(schema, { ...RULES, replyBudget: false }, ramble, maxTokens, maxTokens);
        expect(before.ended).toBe(false);
        const after = await decode(schema, RULES, ramble, maxTokens, maxTokens);
        expect(after.ended, after.text).toBe(true);
        expect(after.tokens).toBeLessThanOrEqual(maxTokens);
        const value = JSON.parse(after.text) as Record<string, unknown>;
        if (schema === NESTED) expect(value).toEqual({ ab: expect.any(String), cd: expect.any(Array), ef: { gh: expect.any(String) } });
        expect(after.budget).toBeGreaterThan(0);
      }
    });
  }
});
