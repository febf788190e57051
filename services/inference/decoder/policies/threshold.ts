import { commitsOf, type StepContext, type UnmaskPolicy } from "./policy.js";

/**
 * The confidence-threshold rule (Fast-dLLM's parallel decoding): every guess whose
 * confidence is at least `threshold` commits. On its own it may choose nothing; the policy
 * built around it then commits the single most confident guess (withProgress).
 */
export function thresholdRule(threshold: number): UnmaskPolicy {
  if (!(threshold >= 0)) throw new Error(`threshold must be a number >= 0, got ${threshold}`);
  return {
    name: `threshold(${threshold})`,
    choose: (ctx: StepContext) => commitsOf(ctx.guesses.filter((g) => g.confidence >= threshold)),
  };
}
