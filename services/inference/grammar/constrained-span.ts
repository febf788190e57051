import type { FrontierCommit } from "./frontier-rule.js";
import type { GrammarReport, SequenceGrammar } from "./sequence-grammar.js";

/**
 * The grammar side of one Sequence: whether the constraint applies yet (it starts after the
 * thinking span), the commits of the current step, and what the grammar did.
 */
export class ConstrainedSpan {
  /** The constraint applies now (false while the reply is still in its free thinking span). */
  active: boolean;
  readonly report: GrammarReport = { tokens: 0, forced: 0, steps: 0, ms: 0, deadEnd: false, loopGuard: 0, budget: 0 };
  private commits: { index: number; token: number }[] | undefined;
  /** Tokens committed after `</think>` when the constraint opened, offered to the grammar next. */
  private replay: number[] = [];

  constructor(
    private readonly grammar: SequenceGrammar,
    /** The logits' row width. */
    private readonly vocab: number,
  ) {
    this.active = grammar.freeUntil === undefined;
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
    const commit = await this.grammar.step(logits, offsets);
    this.record(commit, started, true);
    this.commits = commit.tokens.map((token, i) => ({ index: frontier + i, token }));
  }

  /**
   * Before a forward: the tokens kept from the thinking span's end that the grammar accepts,
   * then forced continuations at the frontier, all committed without a forward.
   */
  async jumpForward(masked: readonly boolean[]): Promise<{ index: number; token: number }[]> {
    const frontier = masked.indexOf(true);
    if (!this.active || frontier < 0) return [];
    const replay = this.replay;
    this.replay = [];
    const started = performance.now();
    const out = await this.grammar.forced(masked.length - frontier, replay);
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
   * Opens the constraint after the thinking span. `after` are the reply's committed tokens
   * after `</think>` up to the first masked position: the caller masks them again, and the
   * next jump-forward commits them back as far as the grammar accepts them.
   */
  open(after: readonly number[]): void {
    this.active = true;
    this.replay = [...after];
  }

  dispose(): void {
    this.grammar.dispose();
  }

  private record(commit: FrontierCommit, started: number, step: boolean): void {
    this.report.ms += performance.now() - started;
    this.report.tokens += commit.tokens.length;
    this.report.forced += commit.forced;
    if (step) this.report.steps++;
    if (commit.deadEnd) this.report.deadEnd = true;
    this.report.loopGuard += commit.guarded?.loops ?? 0;
    this.report.budget += commit.guarded?.budget ?? 0;
  }
}
