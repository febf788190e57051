// What a Sequence (sequence.ts) is given and gives back: the model facts decoding needs, the
// parameters of one reply, and the text and finish of each step.
import type { GrammarReport, SequenceGrammar } from "../grammar/sequence-grammar.js";
import type { KVPlacement } from "./kv-cache.js";
import type { CommittedLogprob } from "./logprobs.js";
import type { UnmaskPolicy } from "./policies/policy.js";
import type { StopMatcher } from "./reply-text.js";

export type FinishReason = "stop" | "length";

/** The model facts decoding needs (from config.json). */
export interface DecodeModel extends KVPlacement {
  blockSize: number;
  maxPositions: number;
  vocabSize: number;
  maskTokenId: number;
  eosTokenId: number;
  padTokenId: number;
  /** Tokens that end the reply (contract v2); default: the end of turn alone. */
  stopTokenIds?: readonly number[];
  /** 1: logits row i predicts the token at i + 1 (contract v2 `logits_shift`); default 0. */
  logitsShift?: 0 | 1;
}

export interface SequenceParams {
  prompt: readonly number[];
  /** Most reply tokens; the caller has applied the default, the cap and the context. */
  maxTokens: number;
  /** Which guessed positions each step commits (policies/registry.ts). */
  policy: UnmaskPolicy;
  stops: StopMatcher;
  decode: (ids: readonly number[]) => string;
  /** Record each reply token's log-probability and `top` alternatives (logprobs.ts); the forwards then fetch the logits. */
  logprobs?: { top: number };
  /** Decode the reply under this grammar (grammar/constrained-span.ts); the policy decodes the rest. */
  grammar?: SequenceGrammar;
}

export interface BlockText {
  /** Generation block the text was committed in, from 0. */
  blockIndex: number;
  text: string;
  /** With `logprobs`: the entries of the reply tokens whose text is now sent, next in reply order. */
  logprobs?: CommittedLogprob[];
  /** Reply tokens generated so far, this block's included (what a stream cut short here is charged). */
  replyTokens: number;
}

export interface Finished {
  reason: FinishReason;
  /** Tokens of the returned reply (after trimming the end of turn, a stop sequence, overshoot). */
  completionTokens: number;
  /** The last piece of text (what the earlier blocks held back, or the final block's text). */
  last: BlockText;
  /** The whole reply text, for logs and tests. */
  text: string;
  /** The reply's tokens after trimming. */
  tokens: number[];
  /** What the grammar did, for a constrained reply. */
  grammar?: GrammarReport;
}

export interface StepResult {
  /** Text of a block that has just been completed (possibly empty: held back). */
  block?: BlockText;
  finished?: Finished;
}
