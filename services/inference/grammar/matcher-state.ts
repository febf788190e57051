import type { GrammarState } from "./frontier-rule.js";
import type { GrammarMatcher } from "./xgrammar.js";

/** XGrammar's matcher as a GrammarState; the bitmask is computed once per state. */
export class MatcherState implements GrammarState {
  private mask: Int32Array | undefined;

  constructor(private readonly matcher: GrammarMatcher) {}

  async allowed(): Promise<Int32Array> {
    this.mask ??= await this.matcher.getNextTokenBitmask();
    return this.mask;
  }

  accept(token: number): boolean {
    const ok = this.matcher.acceptToken(token);
    if (ok) this.mask = undefined;
    return ok;
  }

  forcedText(): string {
    return this.matcher.findJumpForwardString();
  }

  terminated(): boolean {
    return this.matcher.isTerminated();
  }

  dispose(): void {
    this.matcher.dispose();
  }
}
