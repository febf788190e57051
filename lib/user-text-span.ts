/**
 * User text inside a prompt rendered elsewhere (a decision's state and instructions, rendered by
 * the decision service from decision.json's templates): marked with two private-use code points,
 * so that the engine, which alone knows the tokenizer's special tokens, tokenizes what is between
 * them as text (services/inference/prompt/user-text.ts, escapeUserSpans) while the template's own
 * markup stays control tokens. The marks come out of the prompt before it is tokenized.
 */
export const USER_TEXT_OPEN = "\u{10FFFB}";
export const USER_TEXT_CLOSE = "\u{10FFFC}";

const MARKS = /[\u{10FFFB}\u{10FFFC}]/gu;

/** `text` marked as user text; empty text stays empty (a template's `if` still sees it as unset). Marks typed in it become U+FFFD. */
export function markUserText(text: string): string {
  if (text === "") return text;
  return USER_TEXT_OPEN + text.replace(MARKS, "\uFFFD") + USER_TEXT_CLOSE;
}
