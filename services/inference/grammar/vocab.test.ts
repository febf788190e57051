import { describe, expect, it } from "vitest";
import { DEFAULT_GRAMMAR_OPTIONS, ModelGrammars } from "./model-grammars.js";
import { grammarTokenBytes, grammarVocabType } from "./vocab.js";

// A SentencePiece-style BPE vocabulary as Gemma's tokenizer.json holds it: `▁` for a space,
// `<0xAB>` byte tokens for what has no token of its own.
const tokens = ["<pad>", "<eos>", "{", "}", '"', ":", ",", "a", "x", "▁", "▁y", "<0x0A>", "<0xC3>", "<0xA9>"];
const tokenizerJson = {
  model: { type: "BPE", byte_fallback: true, vocab: Object.fromEntries(tokens.map((t, i) => [t, i])) },
  added_tokens: [
    { id: 0, content: "<pad>" },
    { id: 1, content: "<eos>" },
  ],
};
const id = (t: string) => tokens.indexOf(t);

describe("grammar vocabularies with byte fallback (Gemma's)", () => {
  it("reads ▁ as a space and <0xAB> as its byte", () => {
    expect(grammarVocabType(tokenizerJson)).toBe("byte_fallback");
    expect(grammarVocabType({ model: { vocab: {} } })).toBe("byte_level");
    const bytes = grammarTokenBytes(tokens, [], "byte_fallback");
    expect(Array.from(bytes[id("▁y")]!)).toEqual([0x20, 0x79]);
    expect(Array.from(bytes[id("<0xC3>")]!)).toEqual([0xc3]);
  });

  it("XGrammar's matcher takes the template's JSON spelled in that vocabulary (spaces as ▁, é as two byte tokens)", async () => {
    const grammars = await ModelGrammars.create(tokenizerJson, tokens.length, id("<eos>"), DEFAULT_GRAMMAR_OPTIONS);
    const schema = { type: "object", properties: { a: { type: "string" } }, required: ["a"], additionalProperties: false };
    const matcher = await grammars.matcher(await grammars.compile({ kind: "json_schema", schema }));
    // {"a": "x yé"}
    const reply = ["{", '"', "a", '"', ":", "▁", '"', "x", "▁y", "<0xC3>", "<0xA9>", '"', "}", "<eos>"];
    for (const t of reply) expect(matcher.acceptToken(id(t)), t).toBe(true);
    expect(matcher.isTerminated()).toBe(true);
    matcher.dispose();
  }, 60_000);
});
