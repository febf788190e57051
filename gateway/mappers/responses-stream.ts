import type { GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { SseWriter } from "../sse.js";
import { type StreamErrorBody, type StreamOutcome, streamGeneration } from "./generation-stream.js";
import { createResponseBuilder, type ResponseMeta, type ResponseStreamEvent } from "./responses-response.js";

/**
 * Streams one generation as the Responses API's events (`event: <type>` then its data, each
 * with `type` and `sequence_number`): response.created, response.in_progress, then per output
 * item output_item.added, its part's added / delta / done events and output_item.done, and
 * last response.completed or response.incomplete (or `error` then response.failed). No
 * `[DONE]`: the terminal event ends the stream, as OpenAI's do.
 */

/** As StreamOutcome, less deltasSent: `done` means the terminal event was sent, `failed` response.failed. */
export type ResponseStreamOutcome = Omit<StreamOutcome, "deltasSent">;

/**
 * As streamCompletion (chat-response.ts), in the Responses API's framing: the first event is
 * awaited before anything is written, so a refusal still gets its own HTTP status (thrown,
 * nothing sent); once open, every failure ends the stream with response.failed, never a hang.
 * `events` must be created with `sse.signal` (or a signal that follows it) so a client that
 * leaves cancels the generation. `countTokens` gives the tokens of the thinking text for the
 * final usage.
 */
export function streamResponse(
  sse: SseWriter,
  events: AsyncIterable<GenerateResponse>,
  meta: ResponseMeta,
  toErrorBody: (err: unknown) => StreamErrorBody,
  countTokens: (text: string) => Promise<number>,
): Promise<ResponseStreamOutcome> {
  const builder = createResponseBuilder(meta);
  const send = (stream: SseWriter, event: ResponseStreamEvent) => stream.sendEvent(event.type, event);
  return streamGeneration(sse, events, builder, toErrorBody, {
    send,
    closing: async () => [builder.finish(await countTokens(builder.reasoning))],
    end: (stream) => stream.finish(),
    async fail(stream, error) {
      for (const event of builder.fail(error)) if (!(await send(stream, event))) return false;
      await stream.finish();
      return true;
    },
  });
}
