import { bannedTokens } from "../core/banned-tokens.js";
import { commitAtFrontier, commitForced, type FrontierCommit, type GrammarState } from "./frontier-rule.js";
import type { ValueGuard } from "./loop-guard.js";
import type { ForcedCommit, GrammarRules, SequenceGrammar } from "./sequence-grammar.js";

/**
 * A reply's grammar on the calling thread, over any GrammarState (XGrammar's, or a test's).
 * With a `guard` (loop-guard.ts) every accepted token is shown to it and it steers the guesses.
 */
export function localSequenceGrammar(
  inner: GrammarState & { dispose?(): void },
  encode: (text: string) => number[],
  rules: GrammarRules,
  freeUntil?: number,
  guard?: ValueGuard,
): SequenceGrammar {
  const banned = bannedTokens(rules.vocab, rules.banned);
  const state = guard === undefined ? inner : guardedState(inner, guard);
  /** The guard's interventions since the last commit, carried by the commit. */
  let seen = { loops: 0, budget: 0 };
  const withCounts = <T extends FrontierCommit>(commit: T): T => {
    if (guard === undefined) return commit;
    const { loops, budget } = guard.counts;
    const delta = { loops: loops - seen.loops, budget: budget - seen.budget };
    seen = { loops, budget };
    return delta.loops + delta.budget > 0 ? { ...commit, guarded: delta } : commit;
  };
  return {
    step: async (logits, offsets) =>
      withCounts(
        await commitAtFrontier(state, {
          logits,
          offsets,
          vocab: rules.vocab,
          banned,
          threshold: rules.threshold,
          encode,
          ...(guard !== undefined ? { steer: guard } : {}),
        }),
      ),
    async forced(room, replay) {
      const out: ForcedCommit = { tokens: [], forced: 0, deadEnd: false, replayed: 0 };
      for (const token of replay) {
        if (out.tokens.length >= room || state.terminated() || !state.accept(token)) break;
        out.tokens.push(token);
        out.replayed++;
      }
      await commitForced(state, encode, rules.vocab, room, out satisfies FrontierCommit);
      return out;
    },
    dispose: () => inner.dispose?.(),
    ...(freeUntil !== undefined ? { freeUntil } : {}),
  };
}

/** `inner` with every token it accepts also shown to the guard. */
function guardedState(inner: GrammarState, guard: ValueGuard): GrammarState {
  return {
    allowed: () => inner.allowed(),
    accept(token) {
      if (!inner.accept(token)) return false;
      guard.committed(token);
      return true;
    },
    forcedText: () => inner.forcedText(),
    terminated: () => inner.terminated(),
  };
}
