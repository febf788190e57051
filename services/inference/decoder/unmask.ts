import type { Readout } from "./forward.js";

/** The model's guess for one masked position. */
export interface Guess {
  /** Index of the position within its block. */
  index: number;
  /** The most likely allowed token (greedy). */
  token: number;
  /** Its probability under the softmax over the whole vocabulary. */
  confidence: number;
}

/**
 * Tokens that are never a reply token (the mask and pad tokens), as flags by token id.
 * They are left out of the softmax entirely, as if their logits were -inf.
 */
export function bannedTokens(vocab: number, ids: readonly number[]): Uint8Array {
  const flags = new Uint8Array(vocab);
  for (const id of ids) if (id >= 0 && id < vocab) flags[id] = 1;
  return flags;
}

/**
 * Greedy guess at one position from its logits `logits[offset, offset + vocab)`: the most
 * likely allowed token and its probability under the softmax over the allowed tokens. Ties
 * go to the lowest token id, so decoding is deterministic.
 */
export function guessAt(logits: Float32Array, offset: number, vocab: number, banned: Uint8Array, index: number): Guess {
  let max = -Infinity;
  let best = -1;
  for (let v = 0; v < vocab; v++) {
    const x = logits[offset + v]!;
    if (x > max && banned[v] === 0) {
      max = x;
      best = v;
    }
  }
  let sum = 0;
  for (let v = 0; v < vocab; v++) if (banned[v] === 0) sum += Math.exp(logits[offset + v]! - max);
  return { index, token: best, confidence: 1 / sum };
}

/** The guess at position `at` of a forward's readout (computed in the model graph). */
export function readoutGuess(readout: Readout, at: number, index: number): Guess {
  return { index, token: Number(readout.token[at]!), confidence: readout.confidence[at]! };
}

/**
 * The confidence-threshold rule: every guess whose confidence is at least `threshold` is
 * committed, and always at least the single most confident one (the first on ties).
 */
export function chooseToUnmask(guesses: readonly Guess[], threshold: number): Guess[] {
  const chosen = guesses.filter((g) => g.confidence >= threshold);
  if (chosen.length > 0 || guesses.length === 0) return chosen;
  let best = guesses[0]!;
  for (const g of guesses) if (g.confidence > best.confidence) best = g;
  return [best];
}

/**
 * The same choice as `chooseToUnmask(positions.map(guessAt), threshold)`, computed with less
 * work: a position's softmax sum is a running sum of non-negative terms, so its confidence
 * (1 / sum) can only fall as terms are added. A position stops being summed as soon as it can
 * no longer reach the threshold; if no position reaches it, the sums resume (in the same
 * order, so the floats are identical) only while they can still beat the best one found.
 * `offsets[i]` is where position `indexes[i]`'s logits start.
 */
export function selectToUnmask(
  logits: Float32Array,
  offsets: readonly number[],
  indexes: readonly number[],
  vocab: number,
  banned: Uint8Array,
  threshold: number,
): { index: number; token: number }[] {
  const n = offsets.length;
  const max = new Float64Array(n);
  const token = new Int32Array(n);
  const sum = new Float64Array(n);
  const next = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const offset = offsets[i]!;
    let m = -Infinity;
    let best = -1;
    for (let v = 0; v < vocab; v++) {
      const x = logits[offset + v]!;
      if (x > m && banned[v] === 0) {
        m = x;
        best = v;
      }
    }
    max[i] = m;
    token[i] = best;
  }

  const chosen: { index: number; token: number }[] = [];
  for (let i = 0; i < n; i++) {
    const offset = offsets[i]!;
    const m = max[i]!;
    let s = 0;
    let v = 0;
    for (; v < vocab; v++) {
      if (banned[v] !== 0) continue;
      s += Math.exp(logits[offset + v]! - m);
      if (1 / s < threshold) {
        v++;
        break;
      }
    }
    sum[i] = s;
    next[i] = v;
    if (v >= vocab && 1 / s >= threshold) chosen.push({ index: indexes[i]!, token: token[i]! });
  }
  if (chosen.length > 0 || n === 0) return chosen;

  // None reached the threshold: the most confident one (the first on ties).
  let best = -1;
  let bestConfidence = -Infinity;
  for (let i = 0; i < n; i++) {
    const offset = offsets[i]!;
    const m = max[i]!;
    let s = sum[i]!;
    let v = next[i]!;
    if (1 / s <= bestConfidence) continue;
    for (; v < vocab; v++) {
      if (banned[v] !== 0) continue;
      s += Math.exp(logits[offset + v]! - m);
      if (1 / s <= bestConfidence) break;
    }
    if (v >= vocab && 1 / s > bestConfidence) {
      bestConfidence = 1 / s;
      best = i;
    }
  }
  return [{ index: indexes[best]!, token: token[best]! }];
}
