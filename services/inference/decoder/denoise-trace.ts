import type { Sequence } from "./sequence.js";

export interface TracedCommit {
  /** Position within the block. */
  position: number;
  tokenId: number;
  /** Committed by the grammar before the forward (jump-forward), not chosen from its guesses. */
  forced: boolean;
}

/** One denoising forward of a sequence's current block, as the live view shows it. */
export interface DenoiseStep {
  /** Generation block, from 0. */
  blockIndex: number;
  /** Forward within the block, from 1 (0: grammar-forced tokens before the block's first forward). */
  step: number;
  blockSize: number;
  /** Positions before this one hold the prompt's tail (never masked). */
  replyStart: number;
  /** Positions committed since the previous step, in order. */
  committed: TracedCommit[];
  /** Positions still masked after this forward. */
  masked: number;
}

type BlockView = ReturnType<Sequence["currentBlock"]>;

/**
 * Follows one sequence from the outside: the current block as last seen against the block now
 * tells which positions were committed, whichever policy (or grammar) chose them. Called after
 * a jump-forward (commits without a forward, reported with the next forward's) and after each
 * forward. When a forward completes a block the sequence moves on to the next one; the
 * completed block's tokens then lead its next step row (written as clean KV by the next forward).
 */
export class DenoiseTrace {
  private last: BlockView;
  private step = 0;
  private forced: TracedCommit[] = [];

  constructor(
    private readonly seq: Sequence,
    private readonly modelBlockSize: number,
  ) {
    this.last = seq.currentBlock();
  }

  /**
   * After a jump-forward: its commits wait for the next forward's step, unless it ended the
   * reply; then they are the last step (numbered like the forward before them).
   */
  afterJump(): DenoiseStep | undefined {
    this.forced.push(...this.diff(true));
    if (!this.seq.done) return undefined;
    return this.report();
  }

  /** After a forward: what it committed, with the jump-forward commits before it. */
  afterForward(): DenoiseStep {
    this.step++;
    return this.report(this.diff(false));
  }

  private report(fresh: TracedCommit[] = []): DenoiseStep {
    const block = this.last;
    const committed = [...this.forced, ...fresh].sort((a, b) => a.position - b.position);
    this.forced = [];
    const now = this.seq.currentBlock();
    const moved = now.start !== block.start;
    const step: DenoiseStep = {
      blockIndex: Math.floor((block.start - this.seq.firstBlockStart) / this.modelBlockSize),
      step: this.step,
      blockSize: block.tokens.length,
      replyStart: Math.max(0, this.seq.promptLength - block.start),
      committed,
      masked: moved ? 0 : now.masked.filter(Boolean).length,
    };
    if (moved) this.step = 0;
    this.last = now;
    return step;
  }

  /** Positions masked when last seen and committed now (all of them when the block was completed). */
  private diff(forced: boolean): TracedCommit[] {
    const now = this.seq.currentBlock();
    const moved = now.start !== this.last.start;
    const tokens = moved ? this.seq.stepTokens().slice(0, this.last.tokens.length) : now.tokens;
    const out: TracedCommit[] = [];
    for (let j = 0; j < this.last.masked.length; j++) {
      if (this.last.masked[j] && (moved || !now.masked[j])) out.push({ position: j, tokenId: tokens[j]!, forced });
    }
    // A jump-forward never completes a block (Sequence.prepareStep leaves the last position to a forward).
    if (!moved || forced) this.last = now;
    return out;
  }
}
