import type { TextTokenizer } from "./tokenizer.js";
import { encodeMarkedText } from "./user-text.js";

/** One prompt (the prefix, then one suffix) as tokens. */
export interface PromptTokens {
  /** How many leading tokens are the prefix's own (`prefixIds.slice(0, common)`). */
  common: number;
  /** The prompt's tokens after those. */
  rest: number[];
}

export interface ScorePromptTokens {
  prefixIds: number[];
  /** One per suffix: exactly `encode(prefix + suffix)`, as `prefixIds.slice(0, common)` + `rest`. */
  prompts: PromptTokens[];
}

/**
 * A suffix that starts a new line with a visible character. The decision templates' questions
 * all do ("\nQuestion: …"), and at such a seam a byte-level BPE tokenizer with a GPT-2-style
 * pre-tokenizer never joins the two sides: the newline is a piece of its own or ends the
 * prefix's trailing whitespace run, whatever the prefix ends with.
 */
const SEAM = /^\n\S/u;

/**
 * Tokenizes a Score request's prompts — each `prefix + suffix` — with exactly the ids of
 * encoding each whole prompt, but without re-encoding the prefix for every suffix (with a
 * 1,000-token state and 16 questions that was most of the request's CPU time).
 *
 * Where the tokenizer keeps the two sides of the seam apart (SEAM, checked once per tokenizer
 * against a set of awkward cases: trailing whitespace runs, digits, contractions, special
 * tokens, non-ASCII) a prompt is `encode(prefix)` + `encode(suffix)`. That is verified on
 * every request too: the first seam-shaped prompt is also encoded whole and must come out the
 * same. Any other prompt, or a tokenizer or prefix where the check fails, is encoded whole.
 */
export function tokenizeScorePrompts(tokenizer: TextTokenizer, prefix: string, suffixes: readonly string[]): ScorePromptTokens {
  // A decision's state and instructions are marked user text: their special tokens' spelling is text (user-text.ts).
  const encode = (text: string) => encodeMarkedText(text, tokenizer.userText, (t) => tokenizer.encode(t));
  const prefixIds = encode(prefix);
  const whole = (suffix: string): PromptTokens => wholePrompt(encode(prefix + suffix), prefixIds);
  const prompts: (PromptTokens | undefined)[] = suffixes.map(() => undefined);

  const first = suffixes.findIndex((s) => SEAM.test(s));
  if (first >= 0 && keepsSeam(tokenizer)) {
    const checked = whole(suffixes[first]!);
    prompts[first] = checked;
    const own = encode(suffixes[first]!);
    if (checked.common === prefixIds.length && sameIds(checked.rest, own)) {
      suffixes.forEach((suffix, i) => {
        if (i !== first && SEAM.test(suffix)) prompts[i] = { common: prefixIds.length, rest: encode(suffix) };
      });
    }
  }
  return { prefixIds, prompts: prompts.map((p, i) => p ?? whole(suffixes[i]!)) };
}

function wholePrompt(ids: number[], prefixIds: readonly number[]): PromptTokens {
  const common = commonPrefix(ids, prefixIds);
  return { common, rest: ids.slice(common) };
}

const SEAM_LEFTS = [
  "",
  "word",
  "word ",
  "word  ",
  "word\t",
  "word\n",
  "word\n\n",
  "word \n",
  "word\n ",
  "a\r",
  "a\r\n",
  "12",
  "123",
  "1234",
  "x'",
  "don't",
  "x.",
  "x!?",
  "é",
  "日本",
  "😀",
  " ",
  "\n",
  "x\u00a0",
  "<|im_end|>",
  "x<|im_start|>",
  "<|im_start|>user\nState:\n",
];
const SEAM_RIGHTS = ["\nQuestion: x?", "\nA", "\n1", "\n'", "\n's", "\n.", "\n<|im_end|>", "\né", "\n😀"];

const seamKept = new WeakMap<TextTokenizer, boolean>();

/** Whether `encode(left + right) = encode(left) + encode(right)` on every case of the set, for right sides shaped like SEAM. */
function keepsSeam(tokenizer: TextTokenizer): boolean {
  let kept = seamKept.get(tokenizer);
  if (kept === undefined) {
    kept = SEAM_LEFTS.every((left) =>
      SEAM_RIGHTS.every((right) => sameIds(tokenizer.encode(left + right), [...tokenizer.encode(left), ...tokenizer.encode(right)])),
    );
    seamKept.set(tokenizer, kept);
  }
  return kept;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && commonPrefix(a, b) === a.length;
}

export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
