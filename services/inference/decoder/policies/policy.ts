/**
 * The unmasking-policy interface (docs/architecture.md §5): each denoising step the decoder shows a
 * policy the current block and the model's guesses at its masked positions, and the policy
 * answers which positions to commit, and with which token. The decoder owns the block, the
 * KV cache and the fused commit, so a policy can never make decoding inexact: whatever it
 * chooses, the block's KV is written only once every position is committed.
 */

/** The model's guess for one masked position. */
export interface Guess {
  /** Index of the position within its block. */
  index: number;
  /** The most likely allowed token (greedy; the lowest id on ties). */
  token: number;
  /** Its probability under the softmax over the allowed tokens. */
  confidence: number;
  /**
   * The `topK` most likely allowed tokens, most likely first (`top[0]` is `token`); present
   * only when the policy asked for `topK > 1`.
   */
  top?: readonly TokenProbability[];
}

export interface TokenProbability {
  token: number;
  probability: number;
}

/** A position to commit and its token (usually the guess's, but a policy may choose another). */
export interface Commit {
  index: number;
  token: number;
}

/** The block being denoised, as a policy sees it. */
export interface BlockView {
  /** Current tokens: committed ones, and the mask token where `masked`. */
  tokens: readonly number[];
  masked: readonly boolean[];
  /** Positions before this hold the prompt's tail: committed, never part of the reply. */
  replyStart: number;
  /** Absolute position of the block's first token. */
  start: number;
}

export interface StepContext {
  block: BlockView;
  /** One guess per masked position, by ascending index. */
  guesses: readonly Guess[];
  /** The guesses of this block's earlier steps, oldest first (each over the positions masked then). */
  history: readonly (readonly Guess[])[];
  /** The model's end-of-turn token (the fill after a reply's end is this token, repeated). */
  eosTokenId: number;
  /**
   * The logits `[vocab]` at block position `index`, when the policy asked for them
   * (`needsLogits`); the mask and pad tokens are not excluded here.
   */
  logitsAt?: (index: number) => Float32Array;
}

export interface UnmaskPolicy {
  /** The policy as a spec (`threshold(0.9)`, `fill(0.5)+threshold(0.9)`): its label in metrics. */
  readonly name: string;
  /** Top tokens per guess the policy reads (default 1: the model's greedy readout suffices). */
  readonly topK?: number;
  /** Whether the policy reads the raw logits (the forward then fetches them instead of the readout). */
  readonly needsLogits?: boolean;
  /**
   * The positions to commit this step: masked positions of the block, each at most once. The
   * decoder commits at least one position per step: if the answer is empty it commits the
   * most confident guess. Called once per forward; a policy may keep per-sequence state (a
   * grammar matcher) when it is created per sequence, but the built-in ones are pure
   * functions of the context, so decoding is deterministic.
   */
  choose(ctx: StepContext): Commit[];
}

/** The most confident guess (the first on ties), or undefined when there is none. */
export function mostConfident(guesses: readonly Guess[]): Guess | undefined {
  let best: Guess | undefined;
  for (const g of guesses) if (best === undefined || g.confidence > best.confidence) best = g;
  return best;
}

/** The guesses' tokens as commits. */
export function commitsOf(guesses: readonly Guess[]): Commit[] {
  return guesses.map(({ index, token }) => ({ index, token }));
}
