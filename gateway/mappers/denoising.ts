import type { GenerateStep } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { DenoisingStep } from "../schemas/chat-response.js";

/** A denoising step of the engine as the chunk's `denoising` object. */
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
