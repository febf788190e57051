import { commitAtFrontier, commitForced, type FrontierCommit } from "./frontier-rule.js";
import type { GrammarReport, SequenceGrammar } from "./sequence-grammar.js";

/**
 * The grammar side of one Sequence: whether the constraint applies yet (it starts after the
 * thinking span), the commits of the current step, and what the grammar did.
 */
export class ConstrainedSpan {
  /** The constraint applies now (false while the reply is still in its free thinking span). */
  active: boolean;
  readonly report: GrammarReport = { tokens: 0, forced: 0, steps: 0, ms: 0, deadEnd: false };
  private commits: { index: number; token: number }[] | undefined;
  private readonly banned: Uint8Array;

  constructor(
    private readonly grammar: SequenceGrammar,
    banned: Uint8Array,
    private readonly vocab: number,
  ) {
    this.active = grammar.freeUntil === undefined;
    this.banned = banned.slice();
    for (const id of grammar.banned ?? []) if (id >= 0 && id < vocab) this.banned[id] = 1;
  }

  get freeUntil(): number | undefined {
    return this.grammar.freeUntil;
  }

  /**
   * The frontier rule over one forward's logits: `masked` are the current block's flags
   * (every position from the frontier on is masked), `blockOffset` the row slot of its
   * first position. The commits are kept for `take`.
   */
  async step(logits: Float32Array, blockOffset: number, masked: readonly boolean[]): Promise<void> {
    const frontier = masked.indexOf(true);
    if (!this.active || frontier < 0) return;
    const offsets: number[] = [];
    for (let j = frontier; j < masked.length; j++) offsets.push((blockOffset + j) * this.vocab);
    const started = performance.now();
    const commit = await commitAtFrontier(this.grammar.state, {
      logits,
      offsets,
      vocab: this.vocab,
      banned: this.banned,
      threshold: this.grammar.threshold,
      encode: this.grammar.encode,
    });
    this.record(commit, started, true);
    this.commits = commit.tokens.map((token, i) => ({ index: frontier + i, token }));
  }

  /** Forced continuations at the frontier, committed without a forward (a block just opened). */
  async jumpForward(masked: readonly boolean[]): Promise<{ index: number; token: number }[]> {
    const frontier = masked.indexOf(true);
    if (!this.active || frontier < 0) return [];
    const started = performance.now();
    const out: FrontierCommit = { tokens: [], forced: 0, deadEnd: false };
    await commitForced(this.grammar.state, this.grammar.encode, this.vocab, masked.length - frontier, out);
    this.record(out, started, false);
    return out.tokens.map((token, i) => ({ index: frontier + i, token }));
  }

  /** This step's commits (once). */
  take(): { index: number; token: number }[] | undefined {
    const commits = this.commits;
    this.commits = undefined;
    return commits;
  }

  /**
   * Opens the constraint after the thinking span: `tokens` are the reply's committed tokens
   * after `</think>` up to the first masked position. Returns how many of them the grammar
   * accepts; the caller masks the rest again.
   */
  open(tokens: readonly number[]): number {
    this.active = true;
    let accepted = 0;
    for (const token of tokens) {
      if (this.grammar.state.terminated() || !this.grammar.state.accept(token)) break;
      accepted++;
    }
    this.report.tokens += accepted;
    return accepted;
  }

  dispose(): void {
    this.grammar.state.dispose();
  }

  private record(commit: FrontierCommit, started: number, step: boolean): void {
    this.report.ms += performance.now() - started;
    this.report.tokens += commit.tokens.length;
    this.report.forced += commit.forced;
    if (step) this.report.steps++;
    if (commit.deadEnd) this.report.deadEnd = true;
  }
}
