/**
 * The constrained commit rule (docs/constrained-decoding.md). A constrained span is decoded
 * from its frontier, the first uncommitted position, rightwards; every position right of the
 * frontier is still masked. Each step, from one forward's logits:
 *
 * 1. forced text: while the grammar admits exactly one continuation (a key, punctuation,
 *    `"}</tool_call>"`, or a single allowed token such as the end of turn once the value is
 *    complete), its tokens are committed without looking at the logits (jump-forward);
 * 2. the next position is guessed under the grammar: the most likely token among those the
 *    grammar allows after everything committed so far, with its probability renormalized
 *    over the allowed tokens; the guess is accepted by the grammar and the rule goes on with
 *    step 1 at the next position;
 * 3. the first guess of a step is always committed; each later guess only while its
 *    probability is at least the threshold. After the first guess below the threshold (or
 *    the first one that fails it) only forced text is committed.
 *
 * So the committed text is always a prefix the grammar accepts, a step commits at least one
 * token while the grammar allows any, and the end of turn is committed only where the
 * grammar may end.
 */

/** A grammar's state after the committed tokens (XGrammar's matcher, or a test's reference). */
export interface GrammarState {
  /** The tokens the grammar allows next, as a bitmask: token v is bit v & 31 of word v >>> 5. */
  allowed(): Promise<Int32Array>;
  /** Advances past `token`; false (state unchanged) when the grammar does not allow it. */
  accept(token: number): boolean;
  /** The text every continuation starts with ("" when more than one is possible). */
  forcedText(): string;
  /** Whether the end of turn has been accepted. */
  terminated(): boolean;
}

export interface FrontierInput {
  /** Flat logits; position i from the frontier starts at `offsets[i]`. */
  logits: Float32Array;
  /** One per position from the frontier to the block's end. */
  offsets: readonly number[];
  vocab: number;
  /** Tokens that are never a reply token (mask, pad), as flags by id. */
  banned: Uint8Array;
  threshold: number;
  encode: (text: string) => number[];
  /** Steers guesses out of values that would not end (loop-guard.ts); absent: plain guesses. */
  steer?: GuessSteer;
}

/** The flag of a role (loop-guard.ts) marking a token that only closes: nothing opens after it. */
export const ONLY_CLOSES = 4;

/** A change to one guess: a token masked, and a logit bonus for the tokens of one role. */
export interface GuessBias {
  /** The token masked (when other tokens remain allowed). */
  ban?: number;
  /** Tokens' roles by id (flags aside); those of `role` get `bonus` added to their logit. */
  favour?: Uint8Array;
  role?: number;
  bonus: number;
  /** Added on top of `bonus` for the tokens of `role` flagged ONLY_CLOSES (the reply budget's last stretch). */
  closeOnly?: number;
}

export interface GuessSteer {
  steering(): GuessBias | undefined;
  /** The steering changed the guess: by its mask (`loop`), or by its bonus. */
  intervened(bias: GuessBias, loop: boolean): void;
}

export interface FrontierCommit {
  /** The tokens committed from the frontier, in order. */
  tokens: number[];
  /** How many of them were forced (committed without the logits). */
  forced: number;
  /** The grammar allowed no token at all: the reply must end with what is committed. */
  deadEnd: boolean;
  /** Guesses the loop guard and the length budget changed in this commit (loop-guard.ts). */
  guarded?: { loops: number; budget: number };
}

export async function commitAtFrontier(state: GrammarState, input: FrontierInput): Promise<FrontierCommit> {
  const out: FrontierCommit = { tokens: [], forced: 0, deadEnd: false };
  const room = input.offsets.length;
  let guessed = 0;
  let guessing = true;
  while (out.tokens.length < room && !state.terminated()) {
    await commitForced(state, input.encode, input.vocab, room, out);
    if (!guessing || out.tokens.length >= room || state.terminated()) break;
    const guess = steeredGuess(input, input.offsets[out.tokens.length]!, await state.allowed());
    if (guess === undefined) {
      out.deadEnd = true;
      break;
    }
    if (guessed > 0 && guess.confidence < input.threshold) break;
    if (!state.accept(guess.token)) {
      out.deadEnd = true;
      break;
    }
    out.tokens.push(guess.token);
    guessed++;
    if (guess.confidence < input.threshold) guessing = false;
  }
  return out;
}

/**
 * The guess at one position: the plain masked guess, or under the steering, the guess with the
 * closing bonus, and if that is the token the loop guard masks, the best other one (none other
 * allowed: the masked token stays). Each change the steering makes is reported to it.
 */
function steeredGuess(input: FrontierInput, offset: number, mask: Int32Array): { token: number; confidence: number } | undefined {
  const { logits, vocab, banned, steer } = input;
  const plain = maskedGuess(logits, offset, vocab, banned, mask);
  const bias = steer?.steering();
  if (plain === undefined || bias === undefined) return plain;
  const favoured = bias.bonus > 0 ? maskedGuess(logits, offset, vocab, banned, mask, { ...bias, ban: undefined }) : plain;
  if (favoured === undefined) return plain;
  if (bias.ban !== undefined && favoured.token === bias.ban) {
    const other = maskedGuess(logits, offset, vocab, banned, mask, bias);
    if (other !== undefined) {
      steer!.intervened(bias, true);
      return other;
    }
  }
  if (favoured.token !== plain.token) steer!.intervened(bias, false);
  return favoured;
}

/** Commits forced continuations (jump-forward) while there is room. */
export async function commitForced(
  state: GrammarState,
  encode: (text: string) => number[],
  vocab: number,
  room: number,
  out: FrontierCommit,
): Promise<void> {
  while (out.tokens.length < room && !state.terminated()) {
    const text = state.forcedText();
    if (text !== "") {
      let accepted = 0;
      for (const id of encode(text)) {
        if (out.tokens.length >= room || !state.accept(id)) break;
        out.tokens.push(id);
        out.forced++;
        accepted++;
      }
      if (accepted > 0) continue;
    }
    const only = singleAllowed(await state.allowed(), vocab);
    if (only === undefined || !state.accept(only)) return;
    out.tokens.push(only);
    out.forced++;
  }
}

/**
 * The one token below `vocab` a bitmask allows, or undefined when it allows none or several.
 * (XGrammar may set the bits past the vocabulary in the last word.)
 */
export function singleAllowed(mask: Int32Array, vocab: number): number | undefined {
  let found: number | undefined;
  for (let w = 0; w < mask.length && w * 32 < vocab; w++) {
    const past = (w + 1) * 32 - vocab;
    const word = past > 0 ? mask[w]! & (-1 >>> past) : mask[w]!;
    if (word === 0) continue;
    if ((word & (word - 1)) !== 0 || found !== undefined) return undefined;
    found = w * 32 + (31 - Math.clz32(word));
  }
  return found;
}

/**
 * The most likely token the mask allows (never a banned one) at `logits[offset, offset + vocab)`,
 * and its probability under the softmax over the allowed tokens only. Ties go to the lowest id.
 */
export function maskedGuess(
  logits: Float32Array,
  offset: number,
  vocab: number,
  banned: Uint8Array,
  mask: Int32Array,
  bias?: {
    ban?: number | undefined;
    favour?: Uint8Array | undefined;
    role?: number | undefined;
    bonus: number;
    closeOnly?: number | undefined;
  },
): { token: number; confidence: number } | undefined {
  const ban = bias?.ban ?? -1;
  const favour = bias !== undefined && bias.bonus > 0 ? bias.favour : undefined;
  const role = bias?.role ?? -1;
  const bonus = bias?.bonus ?? 0;
  const closeOnly = bias?.closeOnly ?? 0;
  const extra = (r: number) => ((r & ~ONLY_CLOSES) !== role ? 0 : bonus + ((r & ONLY_CLOSES) !== 0 ? closeOnly : 0));
  const logit = (v: number) => logits[offset + v]! + (favour !== undefined ? extra(favour[v]!) : 0);
  let max = -Infinity;
  let best = -1;
  for (let w = 0; w < mask.length; w++) {
    let word = mask[w]!;
    while (word !== 0) {
      const bit = 31 - Math.clz32(word & -word);
      word &= word - 1;
      const v = w * 32 + bit;
      if (v >= vocab || banned[v] !== 0 || v === ban) continue;
      const x = logit(v);
      if (x > max || (x === max && v < best)) {
        max = x;
        best = v;
      }
    }
  }
  if (best < 0) return undefined;
  let sum = 0;
  for (let w = 0; w < mask.length; w++) {
    let word = mask[w]!;
    while (word !== 0) {
      const bit = 31 - Math.clz32(word & -word);
      word &= word - 1;
      const v = w * 32 + bit;
      if (v < vocab && banned[v] === 0 && v !== ban) sum += Math.exp(logit(v) - max);
    }
  }
  return { token: best, confidence: 1 / sum };
}
