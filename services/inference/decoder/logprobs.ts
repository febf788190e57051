/**
 * Log-probabilities of committed reply tokens (OpenAI's `logprobs`), defined for block
 * diffusion: a token's log-probability is read from the logits of the denoising forward that
 * committed its position, under the softmax over the vocabulary without the mask and pad
 * tokens (the distribution the unmasking rule reads); the alternatives are the most probable
 * tokens at that same position and step. Computed from the logits only when asked for.
 */

export interface TokenChoice {
  token: number;
  logprob: number;
}

export interface CommittedLogprob extends TokenChoice {
  /** The most probable tokens at that position and step, best first (ties: lower id first). */
  top: TokenChoice[];
  /** The sequence's denoising step (from 1) that committed the position. */
  step: number;
}

/**
 * The log-softmax at one position (`logits[offset, offset + vocab)`, `banned` tokens left
 * out) of `token` and of the `k` most probable tokens.
 */
export function logprobsAt(
  logits: Float32Array,
  offset: number,
  vocab: number,
  banned: Uint8Array,
  token: number,
  k: number,
): { logprob: number; top: TokenChoice[] } {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) if (banned[v] === 0 && logits[offset + v]! > max) max = logits[offset + v]!;
  let sum = 0;
  for (let v = 0; v < vocab; v++) if (banned[v] === 0) sum += Math.exp(logits[offset + v]! - max);
  const logZ = max + Math.log(sum);

  // The k largest by insertion into a short sorted list (k ≤ 20).
  const best: number[] = [];
  if (k > 0) {
    for (let v = 0; v < vocab; v++) {
      if (banned[v] !== 0) continue;
      const x = logits[offset + v]!;
      if (best.length === k && x <= logits[offset + best[k - 1]!]!) continue;
      let i = best.length === k ? k - 1 : best.length;
      while (i > 0 && logits[offset + best[i - 1]!]! < x) {
        best[i] = best[i - 1]!;
        i--;
      }
      best[i] = v;
    }
  }
  return {
    logprob: Math.min(0, logits[offset + token]! - logZ),
    top: best.map((v) => ({ token: v, logprob: Math.min(0, logits[offset + v]! - logZ) })),
  };
}
