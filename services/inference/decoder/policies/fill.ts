import type { Commit, StepContext } from "./policy.js";

/**
 * End-of-turn fill (dInfer's early stop, made exact for block diffusion). A reply's last
 * block is filled after its end of turn with the end-of-turn token, so the fill is a suffix
 * of the block by construction:
 *
 * - `suffix`: the longest suffix of the block whose positions are each the end of turn,
 *   committed or guessed at `confidence` or more, commits as one (the model's guesses there
 *   are typically 0.6–0.9 confident, below the threshold, and would otherwise commit one or
 *   two a step, right to left);
 * - `afterEnd`: once an end of turn is committed, every later position of the block is part
 *   of the fill and commits with it, in the same step (no forward of its own).
 *
 * Both take `chosen`, the commits of this step so far, and add to it.
 */
export function fillSuffix(ctx: StepContext, chosen: Map<number, Commit>, confidence: number): void {
  const { tokens, masked, replyStart } = ctx.block;
  const eos = ctx.eosTokenId;
  const guessAt = new Map(ctx.guesses.map((g) => [g.index, g]));
  const suffix: number[] = [];
  for (let j = tokens.length - 1; j >= replyStart; j--) {
    if (!masked[j]) {
      if (tokens[j] !== eos) break;
      continue;
    }
    const already = chosen.get(j);
    if (already !== undefined) {
      if (already.token !== eos) break;
      continue;
    }
    const g = guessAt.get(j);
    if (g === undefined || g.token !== eos || g.confidence < confidence) break;
    suffix.push(j);
  }
  for (const j of suffix) chosen.set(j, { index: j, token: eos });
}

export function fillAfterEnd(ctx: StepContext, chosen: Map<number, Commit>): void {
  const { tokens, masked, replyStart } = ctx.block;
  const eos = ctx.eosTokenId;
  let end = -1;
  for (let j = replyStart; j < tokens.length && end < 0; j++) {
    if (masked[j] ? chosen.get(j)?.token === eos : tokens[j] === eos) end = j;
  }
  if (end < 0) return;
  for (let j = end + 1; j < tokens.length; j++) {
    if (masked[j] && !chosen.has(j)) chosen.set(j, { index: j, token: eos });
  }
}
