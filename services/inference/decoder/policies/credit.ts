import { commitsOf, type Guess, type StepContext, type UnmaskPolicy } from "./policy.js";

/**
 * Credit for stable guesses (after CreditDecoding, arXiv 2510.06133): a position whose best
 * guess has stayed the same over the last steps has earned credit for it. A position
 * commits when the confidences of its current guess, summed over the run of consecutive
 * steps (this one included) in which it was the best guess, reach `bound`; or, when `steps`
 * is above 0, when that run is `steps` long. Uses only the history of guesses, so it adds no
 * work to a forward.
 */
export function creditRule(bound: number, steps: number): UnmaskPolicy {
  if (!(bound > 0)) throw new Error(`credit bound must be > 0, got ${bound}`);
  return {
    name: `credit(bound=${bound},steps=${steps})`,
    choose: (ctx: StepContext) => commitsOf(ctx.guesses.filter((g) => earned(g, ctx.history, bound, steps))),
  };
}

/** Whether `g`'s run of identical best guesses (back through `history`) earns a commit. */
function earned(g: Guess, history: readonly (readonly Guess[])[], bound: number, steps: number): boolean {
  let credit = g.confidence;
  let run = 1;
  for (let t = history.length - 1; t >= 0; t--) {
    if (credit >= bound || (steps > 0 && run >= steps)) return true;
    const past = findGuess(history[t]!, g.index);
    if (past === undefined || past.token !== g.token) break;
    credit += past.confidence;
    run++;
  }
  return credit >= bound || (steps > 0 && run >= steps);
}

/** The guess for block position `index` in one step's guesses (sorted by index). */
export function findGuess(guesses: readonly Guess[], index: number): Guess | undefined {
  let lo = 0;
  let hi = guesses.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const at = guesses[mid]!.index;
    if (at === index) return guesses[mid];
    if (at < index) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}
