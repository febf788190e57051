import type { ForwardOutputs, Readout } from "./forward.js";
import type { Commit, Guess, TokenProbability } from "./policies/policy.js";

export type { Guess } from "./policies/policy.js";

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
 * The guess at one position with its `k` most likely allowed tokens (`top`), from the
 * logits; the same token and confidence as guessAt.
 */
export function guessWithTop(logits: Float32Array, offset: number, vocab: number, banned: Uint8Array, index: number, k: number): Guess {
  const guess = guessAt(logits, offset, vocab, banned, index);
  const max = logits[offset + guess.token]!;
  const top: TokenProbability[] = [];
  // Insertion into a short sorted list: k is small, the vocabulary is scanned once.
  for (let v = 0; v < vocab; v++) {
    if (banned[v] !== 0) continue;
    const x = logits[offset + v]!;
    if (top.length === k && x <= top[k - 1]!.probability) continue;
    let at = top.length;
    while (at > 0 && top[at - 1]!.probability < x) at--;
    top.splice(at, 0, { token: v, probability: x });
    if (top.length > k) top.pop();
  }
  for (const t of top) t.probability = Math.exp(t.probability - max) * guess.confidence;
  return { ...guess, top };
}

/**
 * The guesses at a block's masked positions from a forward's output: position j's prediction
 * is at slot `offset + j` (the caller subtracts a logits shift), read from the greedy readout
 * when it suffices, else from the logits.
 */
export function maskedGuesses(
  out: ForwardOutputs,
  offset: number,
  masked: readonly boolean[],
  vocab: number,
  banned: Uint8Array,
  topK: number,
): Guess[] {
  const readout = topK > 1 ? undefined : out.readout;
  const logits = out.logits;
  const guesses: Guess[] = [];
  for (let j = 0; j < masked.length; j++) {
    if (!masked[j]) continue;
    if (readout !== undefined) guesses.push(readoutGuess(readout, offset + j, j));
    else if (logits === undefined) throw new Error("the forward returned neither the readout nor the logits");
    else if (topK > 1) guesses.push(guessWithTop(logits, (offset + j) * vocab, vocab, banned, j, topK));
    else guesses.push(guessAt(logits, (offset + j) * vocab, vocab, banned, j));
  }
  return guesses;
}

/** A policy may only commit masked positions, each once, to a token the model may emit. */
export function checkCommits(commits: readonly Commit[], masked: readonly boolean[], banned: Uint8Array, policy: string): void {
  const seen = new Set<number>();
  for (const { index, token } of commits) {
    if (!Number.isInteger(index) || index < 0 || index >= masked.length || !masked[index] || seen.has(index)) {
      throw new Error(`unmasking policy ${policy} chose position ${index}, which is not a masked position`);
    }
    if (!Number.isInteger(token) || token < 0 || token >= banned.length || banned[token] !== 0) {
      throw new Error(`unmasking policy ${policy} chose token ${token}, which the model may not emit`);
    }
    seen.add(index);
  }
}
