import { mostConfident, type StepContext, type UnmaskPolicy } from "./policy.js";

/**
 * One position per step, the most confident guess (the first on ties): LLaDA's
 * low-confidence remasking with one token per step, the quality reference the other
 * policies are measured against.
 */
export function sequentialRule(): UnmaskPolicy {
  return {
    name: "sequential",
    choose: (ctx: StepContext) => {
      const best = mostConfident(ctx.guesses);
      return best === undefined ? [] : [{ index: best.index, token: best.token }];
    },
  };
}
