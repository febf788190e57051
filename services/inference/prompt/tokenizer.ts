import { Tokenizer } from "@huggingface/tokenizers";
import { createTokenBytes } from "./token-bytes.js";
import { type UserTextGuard, userTextGuard } from "./user-text.js";

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
  /** A token's exact bytes (token-bytes.ts); without it, the UTF-8 of its decoded text. */
  tokenBytes?(id: number): Uint8Array;
  /** Keeps special tokens typed in user text from becoming control tokens (user-text.ts): escape before rendering, encode the result with it. */
  userText: UserTextGuard;
}

export function createTextTokenizer(tokenizerJson: object, tokenizerConfig: object): TextTokenizer {
  const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  // The library refuses an empty list.
  const decode = (ids: readonly number[]) =>
    ids.length === 0 ? "" : tokenizer.decode(ids as number[], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  const encode = (text: string) => (text === "" ? [] : tokenizer.encode(text, { add_special_tokens: false }).ids);
  return {
    encode,
    decode,
    tokenId: (token) => tokenizer.token_to_id(token),
    tokenBytes: createTokenBytes(tokenizerJson, (id) => tokenizer.id_to_token(id), decode),
    userText: userTextGuard(tokenizerJson, tokenizerConfig, encode),
  };
}
