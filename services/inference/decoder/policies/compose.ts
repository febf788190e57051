import { fillAfterEnd, fillSuffix } from "./fill.js";
import { type Commit, mostConfident, type StepContext, type UnmaskPolicy } from "./policy.js";
import { openSubBlockGuesses } from "./sub-blocks.js";

export interface Composition {
  /** Rules whose choices are united (the first rule's token where two choose one position). */
  rules: readonly UnmaskPolicy[];
  /** Sub-blocks: the rules and the fallback see only the open sub-blocks' guesses. */
  subBlocks?: { size: number; confident: number };
  /** End-of-turn fill at this confidence (fill.ts); it sees the whole block. */
  fill?: { confidence: number };
}

/**
 * One policy from its parts. A step: the rules' union over the open guesses, the
 * end-of-turn suffix; if that is nothing, the most confident open guess (so every step
 * commits at least one position); then everything after a committed end of turn.
 */
export function composePolicy(name: string, parts: Composition): UnmaskPolicy {
  const topK = Math.max(1, ...parts.rules.map((p) => p.topK ?? 1));
  const needsLogits = parts.rules.some((p) => p.needsLogits === true);
  const { subBlocks, fill } = parts;
  return {
    name,
    ...(topK > 1 ? { topK } : {}),
    ...(needsLogits ? { needsLogits } : {}),
    choose: (ctx: StepContext) => {
      const open = subBlocks === undefined ? ctx : { ...ctx, guesses: openSubBlockGuesses(ctx, subBlocks.size, subBlocks.confident) };
      const chosen = new Map<number, Commit>();
      for (const rule of parts.rules) for (const c of rule.choose(open)) if (!chosen.has(c.index)) chosen.set(c.index, c);
      if (fill !== undefined) fillSuffix(ctx, chosen, fill.confidence);
      if (chosen.size === 0) {
        const best = mostConfident(open.guesses);
        if (best !== undefined) chosen.set(best.index, { index: best.index, token: best.token });
      }
      if (fill !== undefined) fillAfterEnd(ctx, chosen);
      return [...chosen.values()].sort((a, b) => a.index - b.index);
    },
  };
}
