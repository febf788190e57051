import type { GrammarState } from "./frontier-rule.js";

/** What a Sequence needs to decode its reply under a grammar. */
export interface SequenceGrammar {
  state: GrammarState & { dispose(): void };
  encode: (text: string) => number[];
  /** Confidence at which a guess after the step's first is committed. */
  threshold: number;
  /**
   * The token that ends the free thinking span (`</think>`): the reply is decoded freely
   * until it, and constrained after it. Undefined: the whole reply is constrained.
   */
  freeUntil?: number;
  /**
   * Tokens never guessed inside the span (besides mask and pad): the tags the reply parser
   * acts on that the grammar never needs from the model (`<think>`, `</think>`,
   * `</tool_call>`; a call's end is forced text, committed by jump-forward).
   */
  banned?: readonly number[];
}

/** What the grammar did for one reply (logs, metrics, the benchmark). */
export interface GrammarReport {
  /** Tokens committed under the grammar. */
  tokens: number;
  /** Of them, committed by jump-forward (without a forward). */
  forced: number;
  /** Steps decoded under the grammar. */
  steps: number;
  /** Time spent in the grammar (masks, guesses, jump-forward), milliseconds. */
  ms: number;
  /** The grammar allowed no token (should not happen): the reply ended with what was valid. */
  deadEnd: boolean;
}
