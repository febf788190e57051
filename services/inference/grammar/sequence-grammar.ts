import type { FinishRules } from "./loop-guard.js";
import type { FrontierCommit } from "./frontier-rule.js";

/** What a jump-forward commits: the replayed tokens first, then the forced ones. */
export interface ForcedCommit extends FrontierCommit {
  /** How many of `replay` the grammar accepted (they lead `tokens`). */
  replayed: number;
}

/**
 * The grammar of one reply, as the Sequence uses it: the frontier rule (frontier-rule.ts)
 * over a step's logits, and jump-forward. Implemented in-thread (local-grammar.ts: tests, and
 * inside the grammar worker) and over the grammar worker thread (grammar-client.ts), where
 * XGrammar compiles and matches off the event loop.
 */
export interface SequenceGrammar {
  /**
   * The frontier rule over one forward's logits: position i from the frontier starts at
   * `offsets[i]` of `logits` (ascending, one per position to the block's end).
   */
  step(logits: Float32Array, offsets: readonly number[]): Promise<FrontierCommit>;
  /**
   * Jump-forward within `room` positions: first the `replay` tokens in order while the grammar
   * accepts them (tokens the model committed after `</think>` before the constraint opened),
   * then the forced continuations.
   */
  forced(room: number, replay: readonly number[]): Promise<ForcedCommit>;
  /** Releases the matcher (the reply is over). */
  dispose(): void;
  /**
   * The token that ends the free thinking span (`</think>`): the reply is decoded freely
   * until it, and constrained after it. Undefined: the whole reply is constrained.
   */
  freeUntil?: number;
}

/** How a reply's grammar decodes, fixed when it starts. */
export interface GrammarRules {
  /** Confidence at which a guess after the step's first is committed. */
  threshold: number;
  vocab: number;
  /**
   * Tokens never guessed inside the span: the model's banned ones (mask, pad) and the tags the
   * reply parser acts on that the grammar never needs from the model (`<think>`, `</think>`,
   * `</tool_call>`; a call's end is forced text, committed by jump-forward).
   */
  banned: readonly number[];
  /** The loop guard and the length budgets (loop-guard.ts); absent: none. */
  finish?: FinishRules;
  /** The reply's max_tokens: the reply budget closes every value before it (loop-guard.ts). */
  maxTokens?: number;
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
  /** Guesses the loop guard changed (the repeating continuation masked). */
  loopGuard: number;
  /** Guesses the soft length budget changed (a closing token favoured). */
  budget: number;
}
