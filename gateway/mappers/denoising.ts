import type { GenerateStep } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { DenoisingStep } from "../schemas/chat-response.js";

/** A denoising step of the engine as the chunk's `denoising` object (a canvas model's with `canvas`). */
export function denoisingOf(step: GenerateStep): DenoisingStep {
  const canvas =
    step.canvas.length > 0
      ? {
          canvas: step.canvas.map((c) => ({ token_id: c.tokenId, text: c.text, accepted: c.accepted })),
          canvas_final: step.canvasFinal,
        }
      : {};
  return {
    block: step.blockIndex,
    step: step.step,
    block_size: step.blockSize,
    reply_start: step.replyStart,
    committed: step.committed.map((c) => ({ position: c.position, token_id: c.tokenId, text: c.text, forced: c.forced })),
    masked: step.masked,
    ...canvas,
  };
}
