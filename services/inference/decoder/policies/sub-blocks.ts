import type { Guess, StepContext } from "./policy.js";

/**
 * Sub-blocks (Fast-dLLM v2): the block is denoised in sub-blocks of `size` positions,
 * aligned to its start, left to right. The first sub-block with a masked position is open;
 * the next one opens once every earlier one is committed, or as soon as its own guesses are
 * all at least `confident` (and so on, left to right). The rules only see, and the
 * at-least-one fallback only picks from, the open sub-blocks' guesses.
 */
export function openSubBlockGuesses(ctx: StepContext, size: number, confident: number): Guess[] {
  const length = ctx.block.tokens.length;
  const bySub = new Map<number, Guess[]>();
  for (const g of ctx.guesses) {
    const s = Math.floor(g.index / size);
    const list = bySub.get(s);
    if (list === undefined) bySub.set(s, [g]);
    else list.push(g);
  }
  const open: Guess[] = [];
  let first = true;
  for (let s = 0; s * size < length; s++) {
    const guesses = bySub.get(s);
    if (guesses === undefined) continue; // fully committed
    if (!first && !guesses.every((g) => g.confidence >= confident)) break;
    open.push(...guesses);
    first = false;
  }
  return open;
}
