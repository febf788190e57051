import { bannedTokens } from "../decoder/unmask.js";
import { commitAtFrontier, commitForced, type FrontierCommit, type GrammarState } from "./frontier-rule.js";
import type { ForcedCommit, GrammarRules, SequenceGrammar } from "./sequence-grammar.js";

/** A reply's grammar on the calling thread, over any GrammarState (XGrammar's, or a test's). */
export function localSequenceGrammar(
  state: GrammarState & { dispose?(): void },
  encode: (text: string) => number[],
  rules: GrammarRules,
  freeUntil?: number,
): SequenceGrammar {
  const banned = bannedTokens(rules.vocab, rules.banned);
  return {
    step: (logits, offsets) => commitAtFrontier(state, { logits, offsets, vocab: rules.vocab, banned, threshold: rules.threshold, encode }),
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
    dispose: () => state.dispose?.(),
    ...(freeUntil !== undefined ? { freeUntil } : {}),
  };
}
