/**
 * The grammar on a canvas (docs/constrained-decoding.md, "On a canvas"): a canvas row decoded
 * under a grammar keeps a frozen prefix, the frontier. Positions left of it are committed (fed
 * to the denoiser as the tokens they are, never renoised); each step the frontier rule of the
 * mask models (grammar/frontier-rule.ts through ConstrainedSpan: jump-forward, the guess under
 * the matcher's mask with the loop guard and budgets, the threshold) commits a run from the
 * frontier on this step's logits; right of it the canvas is the sampler's draft, as when free.
 * A canvas ends when its positions (or the reply's room) are all committed, or the grammar's end is.
 */
import { ConstrainedSpan } from "../../grammar/constrained-span.js";
import type { GrammarReport, SequenceGrammar } from "../../grammar/sequence-grammar.js";
import { acceptMask, nextCanvas } from "./sampler.js";

/**
 * Positions from the frontier whose logits a step hands to the grammar: a step commits a run of
 * confident guesses plus forced text, 1.3 tokens on average on the tiny model (bench/structured.ts),
 * and each row of logits is copied to the grammar thread (1 MB a position at the 26B's
 * vocabulary, 256 MB for a whole canvas). Forced text past the window is committed before the
 * next forward (jumpForward), which needs no logits.
 */
export const FRONTIER_WINDOW = 8;

/** A canvas request's grammar. */
export interface CanvasConstraint {
  /** The grammar from the reply's first position (JSON modes, a forced call); absent: free until `trigger`. */
  grammar?: SequenceGrammar;
  /**
   * Auto tools: the token that opens a call. A finished free canvas holding it is cut after it
   * (the rest is dropped, not encoded), and the reply goes on under `open`'s grammar, given the
   * tokens left to the reply (its reply budget).
   */
  trigger?: { token: number; open(maxTokens: number): Promise<SequenceGrammar> };
  /** The grammar's end (its matcher's stop token: the end of turn). */
  endToken: number;
}

export class CanvasFrontier {
  private readonly span: ConstrainedSpan;
  /** This canvas's committed prefix. */
  committed: number[] = [];
  /** The grammar's end was committed, or it allowed nothing more (a dead end): the reply ends. */
  ended = false;
  /** Forced text may wait at the frontier: a canvas's start, or a step whose commits filled its window. */
  private jumpDue = true;
  /** Committed tokens of this canvas already handed out by `takeNew`. */
  private handedOut = 0;

  constructor(
    grammar: SequenceGrammar,
    vocab: number,
    private readonly endToken: number,
  ) {
    this.span = new ConstrainedSpan(grammar, vocab);
  }

  /** What the grammar did (tokens, forced, steps, ms, dead end, loop guard, budget). */
  get report(): GrammarReport {
    return this.span.report;
  }

  /** Whether this canvas is complete with `room` positions (the canvas, or what the reply has left). */
  done(room: number): boolean {
    return this.ended || this.committed.length >= room;
  }

  /** Before a forward: forced text at the frontier (a key, `{"`, the rest of a key the last step's window cut), committed without a forward. */
  async jumpForward(room: number): Promise<void> {
    if (!this.jumpDue || this.done(room)) return;
    this.jumpDue = false;
    const f = this.committed.length;
    this.take(await this.span.jumpForward(Array.from({ length: room }, (_, i) => i >= f)));
  }

  /** The frontier rule over one step's raw logits `[canvas, vocab]` of this row. */
  async step(logits: Float32Array, room: number): Promise<void> {
    if (this.done(room)) return;
    const window = this.masked(room).length;
    await this.span.step(logits, 0, this.masked(room));
    this.take(this.span.take() ?? []);
    this.jumpDue = this.committed.length >= window;
    if (this.span.report.deadEnd) this.ended = true;
  }

  /**
   * The canvas of the next step: the committed prefix, then the sampler's draft right of it
   * (its entropy-bound acceptance over the draft positions only, the rest renoised).
   */
  nextCanvas(
    entropy: ArrayLike<number>,
    sample: ArrayLike<number>,
    noise: ArrayLike<number>,
    bound: number,
  ): { canvas: Int32Array; accepted: boolean[] } {
    const f = Math.min(this.committed.length, entropy.length);
    const draft = acceptMask(
      Array.from({ length: entropy.length - f }, (_, i) => entropy[f + i]!),
      bound,
    );
    const accepted = [...new Array<boolean>(f).fill(true), ...draft];
    const canvas = nextCanvas(sample, accepted, noise);
    canvas.set(this.committed.slice(0, canvas.length));
    return { canvas, accepted };
  }

  /** This canvas's tokens committed since the last call, up to the grammar's end (committed tokens are final: they can stream at once). */
  takeNew(): number[] {
    const end = this.committed.indexOf(this.endToken);
    const upTo = end < 0 ? this.committed.length : end;
    const out = this.committed.slice(this.handedOut, Math.max(this.handedOut, upTo));
    this.handedOut = Math.max(this.handedOut, upTo);
    return out;
  }

  /** How many of this canvas's tokens `takeNew` has handed out. */
  get handed(): number {
    return this.handedOut;
  }

  /** A finished canvas's tokens: the committed prefix, the end of turn where the grammar ended. */
  canvasTokens(): number[] {
    const out = [...this.committed];
    if (this.ended && !out.includes(this.endToken)) out.push(this.endToken);
    return out;
  }

  /** The next canvas starts from its first position, the grammar where this one left it. */
  nextCanvasStarts(): void {
    this.committed = [];
    this.jumpDue = true;
    this.handedOut = 0;
  }

  dispose(): void {
    this.span.dispose();
  }

  private masked(room: number): boolean[] {
    const f = this.committed.length;
    return Array.from({ length: Math.max(Math.min(room, f + FRONTIER_WINDOW), f) }, (_, i) => i >= f);
  }

  private take(commits: { index: number; token: number }[]): void {
    for (const { token } of commits) {
      this.committed.push(token);
      if (token === this.endToken) this.ended = true;
    }
  }
}
