import { create } from "@bufbuild/protobuf";
import { type GenerateStep, GenerateStepSchema } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { DenoiseStep } from "../decoder/denoise-trace.js";

/** A traced denoising forward as the Generate stream's `step` event, each token decoded on its own. */
export function stepEvent(step: DenoiseStep, decode: (ids: readonly number[]) => string): GenerateStep {
  return create(GenerateStepSchema, {
    blockIndex: step.blockIndex,
    step: step.step,
    blockSize: step.blockSize,
    replyStart: step.replyStart,
    committed: step.committed.map(({ position, tokenId, forced }) => ({ position, tokenId, text: decode([tokenId]), forced })),
    masked: step.masked,
  });
}
