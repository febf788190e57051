import type { GenerateStep } from "../../gen/tessera/inference/v1/inference_pb.js";

/**
 * The `denoising` object of a chunk sent with `stream_options.include_denoising`: one per
 * denoising forward of the current block (README, "Live denoising").
 */
export interface DenoisingStep {
  /** Generation block, from 0. */
  block: number;
  /** Forward within the block, from 1. */
  step: number;
  block_size: number;
  /** Positions before it hold the prompt's tail, never masked. */
  reply_start: number;
  /** Positions committed since the previous step; `forced`: by the grammar, without a forward (jump-forward). */
  committed: { position: number; token_id: number; text: string; forced: boolean }[];
  /** Positions still masked after this forward. */
  masked: number;
}

export function denoisingOf(step: GenerateStep): DenoisingStep {
  return {
    block: step.blockIndex,
    step: step.step,
    block_size: step.blockSize,
    reply_start: step.replyStart,
    committed: step.committed.map((c) => ({ position: c.position, token_id: c.tokenId, text: c.text, forced: c.forced })),
    masked: step.masked,
  };
}
