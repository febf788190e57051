/**
 * The vocabulary XGrammar's TokenizerInfo takes: every token's string by id, as the
 * tokenizer stores it (byte-level BPE: bytes mapped to printable characters; XGrammar decodes
 * them). Added tokens are stored as plain text. Those whose text the reply grammar uses
 * (`textTags`: the model's thinking and tool-call delimiters) keep it, so a trigger like
 * `<tool_call>` matches the single special token as well as the same text spelled in bytes;
 * every other added token (mask, pad, chat markers, decision labels) becomes the empty string,
 * which XGrammar treats as special: never allowed, except the end of turn, passed as the stop
 * token.
 */

interface TokenizerJson {
  model?: { vocab?: Record<string, number> | [string, number][]; byte_fallback?: boolean };
  added_tokens?: { id: number; content: string }[];
}

/**
 * How the vocabulary spells bytes: `byte_level` (GPT-2's printable alphabet: Qwen, the bundled
 * model) or `byte_fallback` (SentencePiece-style BPE: `▁` for a space, `<0x0A>` for a byte that
 * has no token of its own: Gemma's, DiffusionGemma's), as XGrammar's TokenizerInfo takes it.
 */
export type GrammarVocabType = "byte_level" | "byte_fallback";

export function grammarVocabType(tokenizerJson: unknown): GrammarVocabType {
  return (tokenizerJson as TokenizerJson).model?.byte_fallback === true ? "byte_fallback" : "byte_level";
}

export function grammarVocab(tokenizerJson: unknown, vocabSize: number, textTags: readonly string[]): string[] {
  const json = tokenizerJson as TokenizerJson;
  const vocab = new Array<string>(vocabSize).fill("");
  const entries = json.model?.vocab;
  if (entries === undefined || Array.isArray(entries))
    throw new Error("tokenizer.json: a byte-level BPE model with a vocab map is required for grammars");
  for (const [token, id] of Object.entries(entries)) if (id >= 0 && id < vocabSize) vocab[id] = token;
  const keep = new Set<string>(textTags);
  for (const added of json.added_tokens ?? []) {
    if (added.id >= 0 && added.id < vocabSize) vocab[added.id] = keep.has(added.content) ? added.content : "";
  }
  return vocab;
}

/** GPT-2's byte-level alphabet: the character each byte is written as in the vocabulary. */
function byteLevelDecoder(): Map<string, number> {
  const bytes: number[] = [];
  for (let b = 33; b <= 126; b++) bytes.push(b);
  for (let b = 161; b <= 172; b++) bytes.push(b);
  for (let b = 174; b <= 255; b++) bytes.push(b);
  const chars = [...bytes];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    if (!bytes.includes(b)) {
      bytes.push(b);
      chars.push(256 + extra++);
    }
  }
  return new Map(bytes.map((b, i) => [String.fromCharCode(chars[i]!), b]));
}

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

/**
 * The bytes of every token as the grammar sees them (grammarVocab's strings, byte-level
 * decoded, or for `byte_fallback` `▁` as a space and `<0xAB>` as its byte; the kept tags as
 * their UTF-8 text; special tokens empty).
 */
export function grammarTokenBytes(
  vocab: readonly string[],
  textTags: readonly string[],
  type: GrammarVocabType = "byte_level",
): Uint8Array[] {
  const decoder = byteLevelDecoder();
  const tags = new Set<string>(textTags);
  const utf8 = new TextEncoder();
  return vocab.map((token) => {
    if (tags.has(token)) return utf8.encode(token);
    if (type === "byte_fallback") {
      const byte = BYTE_TOKEN.exec(token);
      return byte !== null ? Uint8Array.of(Number.parseInt(byte[1]!, 16)) : utf8.encode(token.replaceAll("\u2581", " "));
    }
    const out = new Uint8Array(token.length);
    let n = 0;
    for (const ch of token) {
      const b = decoder.get(ch);
      if (b === undefined) return utf8.encode(token);
      out[n++] = b;
    }
    return out.subarray(0, n);
  });
}
