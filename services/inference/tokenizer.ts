import { Tokenizer } from "@huggingface/tokenizers";

/**
 * The model's tokenizer as the engine uses it: the prompt is rendered by the chat template
 * (special tokens included as text), so nothing is ever added on encode, and special tokens
 * are kept on decode (the reply parser needs `</think>` and `<tool_call>`).
 */
export interface TextTokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** The id of a token given by its text, or undefined. */
  tokenId(token: string): number | undefined;
}

export function createTextTokenizer(tokenizerJson: object, tokenizerConfig: object): TextTokenizer {
  const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  return {
    encode: (text) => (text === "" ? [] : tokenizer.encode(text, { add_special_tokens: false }).ids),
    // The library refuses an empty list.
    decode: (ids) =>
      ids.length === 0 ? "" : tokenizer.decode(ids as number[], { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    tokenId: (token) => tokenizer.token_to_id(token),
  };
}
