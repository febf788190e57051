import { mostConfident, type Commit, type StepContext, type UnmaskPolicy } from "./policy.js";

/**
 * Runs the rules and commits the union of their choices (the first rule's token where two
 * choose the same position); when none chooses anything, the most confident guess, so every
 * step commits at least one position.
 */
export function withProgress(rules: readonly UnmaskPolicy[]): UnmaskPolicy {
  const policy: UnmaskPolicy = {
    name: rules.map((r) => r.name).join("+"),
    choose: (ctx: StepContext) => {
      const chosen = new Map<number, Commit>();
      for (const rule of rules) for (const c of rule.choose(ctx)) if (!chosen.has(c.index)) chosen.set(c.index, c);
      if (chosen.size === 0) {
        const best = mostConfident(ctx.guesses);
        if (best !== undefined) chosen.set(best.index, { index: best.index, token: best.token });
      }
      return [...chosen.values()].sort((a, b) => a.index - b.index);
    },
  };
  return withNeeds(policy, rules);
}

/** `policy` reading what the `inner` policies read (top-k, logits). */
export function withNeeds(policy: UnmaskPolicy, inner: readonly UnmaskPolicy[]): UnmaskPolicy {
  const topK = Math.max(1, ...inner.map((p) => p.topK ?? 1));
  const needsLogits = inner.some((p) => p.needsLogits === true);
  return { ...policy, ...(topK > 1 ? { topK } : {}), ...(needsLogits ? { needsLogits } : {}) };
}
