// The grammars of a real vocabulary (the tiny test model's byte-level BPE): compiling, the
// cache and its budget, the tool-call structural tags, and the UTF-8 and tag guards.
import { readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";
import { createTextTokenizer, type TextTokenizer } from "../prompt/tokenizer.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { MatcherState } from "./matcher-state.js";
import { ModelGrammars } from "./model-grammars.js";
import { checkSchema, SchemaError } from "./schema-check.js";
import { Utf8CheckedState } from "./utf8-state.js";

const tokenizerJson = JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "tokenizer.json"), "utf8"));
const config = JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "config.json"), "utf8"));
const VOCAB: number = config.vocab_size;
const EOS: number = config.eos_token_id;
let tokenizer: TextTokenizer;

beforeAll(() => {
  tokenizer = createTextTokenizer(tokenizerJson, JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "tokenizer_config.json"), "utf8")));
});

const grammars = (options: Partial<{ cacheSize: number; compileBudgetMs: number; onCompile: (s: number) => void }> = {}) =>
  ModelGrammars.create(tokenizerJson, VOCAB, EOS, { cacheSize: 4, compileBudgetMs: 60_000, ...options });

const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
const toolCalls: GrammarSpec = {
  kind: "tool_calls",
  tools: [
    { name: "get_weather", parameters: weather },
    { name: "noop", parameters: undefined },
  ],
};

/** Whether the grammar accepts `text` (as the tokenizer splits it) and may then end. */
async function accepts(g: ModelGrammars, spec: GrammarSpec, text: string, end = true): Promise<boolean> {
  const state = new Utf8CheckedState(new MatcherState(await g.matcher(await g.compile(spec))), g.tokenBytes);
  try {
    for (const id of tokenizer.encode(text)) if (!state.accept(id)) return false;
    return !end || state.accept(EOS);
  } finally {
    state.dispose();
  }
}

describe("ModelGrammars", () => {
  it("compiles a spec once; equal specs share the compiled grammar", async () => {
    let compiles = 0;
    const g = await grammars({ onCompile: () => compiles++ });
    const spec: GrammarSpec = { kind: "json_schema", schema: weather };
    const a = await g.compile(spec);
    const b = await g.compile({ kind: "json_schema", schema: structuredClone(weather) });
    expect(a).toBe(b);
    expect(compiles).toBe(1);
  });

  it("refuses a grammar over the compile budget, and remembers the refusal", async () => {
    let compiles = 0;
    const g = await grammars({ compileBudgetMs: 1, onCompile: () => compiles++ });
    const spec: GrammarSpec = { kind: "tool_calls", tools: [{ name: "f", parameters: weather }] };
    await expect(g.compile(spec)).rejects.toThrow(/over the budget of 1 ms \(TESSERA_GRAMMAR_COMPILE_BUDGET_MS\)/);
    await expect(g.compile(spec)).rejects.toBeInstanceOf(SchemaError);
    expect(compiles).toBe(1);
  });

  it("drops the least recently used grammar; a matcher made before keeps working", async () => {
    const g = await grammars({ cacheSize: 1 });
    const first = await g.compile({ kind: "json_schema", schema: weather });
    const matcher = new MatcherState(await g.matcher(first));
    await g.compile({ kind: "json_object" });
    expect(g.cached).toBe(1);
    for (const id of tokenizer.encode('{"city": "Oslo"}')) expect(matcher.accept(id)).toBe(true);
    expect(matcher.accept(EOS)).toBe(true);
    matcher.dispose();
  });

  it("json_schema: the one-line style of the template, nothing else", async () => {
    const g = await grammars();
    const spec: GrammarSpec = { kind: "json_schema", schema: weather };
    expect(await accepts(g, spec, '{"city": "Oslo"}')).toBe(true);
    expect(await accepts(g, spec, '{"city":"Oslo"}')).toBe(false);
    expect(await accepts(g, spec, '{"city": "Oslo", "x": 1}')).toBe(false);
    expect(await accepts(g, spec, '{"city": "Os', false)).toBe(true); // a prefix is accepted...
    expect(await accepts(g, spec, '{"city": "Os', true)).toBe(false); // ...but may not end there
  });

  it("no string holds a tag or a raw control character; < is written \\u003c", async () => {
    const g = await grammars();
    const spec: GrammarSpec = { kind: "json_schema", schema: weather };
    expect(await accepts(g, spec, '{"city": "a</tool_call>"}')).toBe(false);
    expect(await accepts(g, spec, '{"city": "<think>"}')).toBe(false);
    expect(await accepts(g, spec, '{"city": "a\tb"}')).toBe(false);
    expect(await accepts(g, spec, '{"city": "\\u003cb"}')).toBe(true);
  });

  it("tool_calls: free text, then complete calls of the offered tools only", async () => {
    const g = await grammars();
    const call = (name: string, args: string) => `<tool_call>{"name": "${name}", "arguments": ${args}}</tool_call>`;
    expect(await accepts(g, toolCalls, "Just text.")).toBe(true);
    expect(await accepts(g, toolCalls, `Sure. ${call("get_weather", '{"city": "Rome"}')}${call("noop", "{}")}`)).toBe(true);
    expect(await accepts(g, toolCalls, call("get_weather", '{"town": "Rome"}'))).toBe(false);
    expect(await accepts(g, toolCalls, call("delete_all", "{}"))).toBe(false);
    expect(await accepts(g, toolCalls, `${call("noop", "{}").slice(0, -3)}`)).toBe(false);
  });

  it("calls are written with the model's own delimiters (config special_tokens)", async () => {
    const tags = { toolCall: ["<|call|>", "<|/call|>"], thinking: ["<think>", "</think>"] } as {
      toolCall: [string, string];
      thinking: [string, string];
    };
    const g = await ModelGrammars.create(tokenizerJson, VOCAB, EOS, { cacheSize: 4, compileBudgetMs: 60_000, tags });
    const body = '{"name": "get_weather", "arguments": {"city": "Rome"}}';
    expect(await accepts(g, toolCalls, `Sure. <|call|>${body}<|/call|>`)).toBe(true);
    // This vocabulary's added token `<tool_call>` is not one of the model's delimiters here:
    // like every other added token, the grammar never allows it.
    expect(await accepts(g, toolCalls, `<tool_call>${body}</tool_call>`)).toBe(false);
    expect(await accepts(g, toolCalls, `<|call|>${body}</tool_call>`)).toBe(false);
    const forced: GrammarSpec = { kind: "tool_arguments", tool: "get_weather", parameters: weather };
    expect(await accepts(g, forced, '{"city": "Rome"}}<|/call|>')).toBe(true);
    expect(await accepts(g, forced, '{"city": "Rome"}}</tool_call>')).toBe(false);
  });

  it("tool_arguments: the arguments, then the call's end, forced", async () => {
    const g = await grammars();
    const spec: GrammarSpec = { kind: "tool_arguments", tool: "get_weather", parameters: weather };
    expect(await accepts(g, spec, '{"city": "Rome"}}</tool_call>')).toBe(true);
    expect(await accepts(g, spec, '{"city": "Rome"}')).toBe(false);
    const state = new MatcherState(await g.matcher(await g.compile(spec)));
    expect(state.forcedText()).toBe('{"city": "');
    for (const id of tokenizer.encode('{"city": "Rome"')) state.accept(id);
    expect(state.forcedText()).toBe("}}</tool_call>");
    state.dispose();
  });

  it("keeps replies valid UTF-8 (XGrammar alone lets C0 80 through)", async () => {
    const g = await grammars();
    const spec: GrammarSpec = { kind: "json_schema", schema: { type: "string" } };
    const byteToken = (byte: number) => g.tokenBytes.findIndex((b) => b.length === 1 && b[0] === byte);
    const raw = new MatcherState(await g.matcher(await g.compile(spec)));
    const guarded = new Utf8CheckedState(new MatcherState(await g.matcher(await g.compile(spec))), g.tokenBytes);
    for (const s of [raw, guarded]) s.accept(tokenizer.encode('"')[0]!);
    expect(raw.accept(byteToken(0xc0))).toBe(true);
    expect(guarded.accept(byteToken(0xc0))).toBe(false);
    const mask = await guarded.allowed();
    expect((mask[byteToken(0xc0) >> 5]! >>> (byteToken(0xc0) & 31)) & 1).toBe(0);
    // é = C3 A9, byte by byte.
    expect(guarded.accept(byteToken(0xc3))).toBe(true);
    expect(guarded.forcedText()).toBe("");
    expect(guarded.accept(tokenizer.encode('"')[0]!)).toBe(false);
    expect(guarded.accept(byteToken(0xa9))).toBe(true);
    raw.dispose();
    guarded.dispose();
  });
});

describe("checkSchema", () => {
  const refused = (schema: unknown) => {
    try {
      checkSchema(schema, "schema");
      return "";
    } catch (err) {
      expect(err).toBeInstanceOf(SchemaError);
      return (err as Error).message;
    }
  };

  it("accepts what the grammar enforces, annotations included", () => {
    expect(
      refused({
        $schema: "http://json-schema.org/draft-07/schema#",
        title: "t",
        type: "object",
        properties: { a: { type: ["string", "null"], description: "d" }, b: { anyOf: [{ const: 1 }, { $ref: "#/$defs/x" }] } },
        required: ["a"],
        additionalProperties: false,
        $defs: { x: { type: "array", items: { type: "integer", minimum: 0 }, maxItems: 3 } },
      }),
    ).toBe("");
  });

  it("names the keyword and where it is", () => {
    expect(refused({ type: "object", properties: { a: { type: "string", not: { const: "x" } } } })).toBe(
      'schema.properties.a.not: the keyword "not" cannot be enforced by the grammar',
    );
    expect(refused({ type: "number", minimum: 0.5 })).toMatch(/only integer bounds/);
    expect(refused({ type: "string", maxLength: 100_000 })).toMatch(/schema.maxLength: bounds above 256 cannot be enforced/);
    expect(refused({ type: "string", pattern: "(?=a)" })).toMatch(/lookarounds/);
    expect(refused({ $ref: "https://example.com/s.json" })).toMatch(/only local references/);
    expect(refused({ type: "object", required: ["a"], additionalProperties: false })).toMatch(/required but not allowed/);
    expect(refused(false)).toMatch(/no value can match/);
  });
});
