import type { Sequence } from "./sequence.js";

/** One denoising forward of a sequence's current block, as the live view shows it. */
export interface DenoiseStep {
  /** Generation block, from 0. */
  blockIndex: number;
  /** Forward within the block, from 1. */
  step: number;
  blockSize: number;
  /** Positions before this one hold the prompt's tail (never masked). */
  replyStart: number;
  /** Positions committed by this forward, in order. */
  committed: { position: number; tokenId: number }[];
  /** Positions still masked after this forward. */
  masked: number;
}

type BlockView = ReturnType<Sequence["currentBlock"]>;

/**
 * Follows one sequence step by step from the outside: the current block before and after a
 * forward tells which positions that forward committed, whichever policy chose them. When a
 * forward completes a block, the sequence moves on to the next one; the completed block's
 * tokens then lead its next step row (they are written as clean KV by the next forward).
 */
export class DenoiseTrace {
  private blockStart = -1;
  private step = 0;

  constructor(
    private readonly seq: Sequence,
    private readonly modelBlockSize: number,
  ) {}

  /** The current block, taken before a forward is applied. */
  before(): BlockView {
    return this.seq.currentBlock();
  }

  /** What the forward applied since `before` committed. */
  after(before: BlockView): DenoiseStep {
    if (before.start !== this.blockStart) {
      this.blockStart = before.start;
      this.step = 0;
    }
    this.step++;
    const now = this.seq.currentBlock();
    const moved = now.start !== before.start;
    const tokens = moved ? this.seq.stepTokens().slice(0, before.tokens.length) : now.tokens;
    const committed: DenoiseStep["committed"] = [];
    let masked = 0;
    for (let j = 0; j < before.masked.length; j++) {
      if (!before.masked[j]) continue;
      if (!moved && now.masked[j]) masked++;
      else committed.push({ position: j, tokenId: tokens[j]! });
    }
    const blockSize = before.tokens.length;
    return {
      blockIndex: Math.floor((before.start - this.seq.promptBlocks) / this.modelBlockSize),
      step: this.step,
      blockSize,
      replyStart: Math.max(0, this.seq.promptLength - before.start),
      committed,
      masked,
    };
  }
}
