import type { GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { SseWriter } from "../sse.js";
import { IncompleteGeneration, type StreamErrorBody } from "./chat.js";
import { createResponseBuilder, type ResponseMeta } from "./responses-response.js";

/**
 * Streams one generation as the Responses API's events (`event: <type>` then its data, each
 * with `type` and `sequence_number`): response.created, response.in_progress, then per output
 * item output_item.added, its part's added / delta / done events and output_item.done, and
 * last response.completed or response.incomplete (or `error` then response.failed). No
 * `[DONE]`: the terminal event ends the stream, as OpenAI's do.
 */

export interface ResponseStreamOutcome {
  /** `done`: the terminal event sent; `client_gone`: the client left or stalled; `failed`: response.failed ended it. */
  outcome: "done" | "client_gone" | "failed";
  promptTokens: number;
  /** Known when the generation finished. */
  completionTokens: number | undefined;
  error?: unknown;
}

/**
 * As streamCompletion (chat-response.ts): the first event is awaited before anything is
 * written, so a refusal still gets its own HTTP status (thrown, nothing sent); once open,
 * every failure ends the stream with response.failed, never a hang. `events` must be created
 * with `sse.signal` (or a signal that follows it) so a client that leaves cancels the
 * generation. `countTokens` gives the tokens of the thinking text for the final usage.
 */
export async function streamResponse(
  sse: SseWriter,
  events: AsyncIterable<GenerateResponse>,
  meta: ResponseMeta,
  toErrorBody: (err: unknown) => StreamErrorBody,
  countTokens: (text: string) => Promise<number>,
): Promise<ResponseStreamOutcome> {
  const builder = createResponseBuilder(meta);
  const outcome = (kind: ResponseStreamOutcome["outcome"], error?: unknown): ResponseStreamOutcome => ({
    outcome: kind,
    promptTokens: builder.usage.promptTokens,
    completionTokens: builder.usage.completionTokens,
    ...(error === undefined ? {} : { error }),
  });
  const send = (event: { type: string }) => sse.sendEvent(event.type, event);

  const iterator = events[Symbol.asyncIterator]();
  const first = await iterator.next();
  sse.open();
  try {
    for (let step = first; !step.done; step = await iterator.next()) {
      for (const event of builder.fromEvent(step.value)) {
        if (!(await send(event))) return outcome("client_gone");
      }
    }
    if (!builder.finished) throw new IncompleteGeneration();
    if (!(await send(builder.finish(await countTokens(builder.reasoning))))) return outcome("client_gone");
    await sse.finish();
    return outcome("done");
  } catch (err) {
    if (sse.closed) return outcome("client_gone", err);
    for (const event of builder.fail(toErrorBody(err))) if (!(await send(event))) return outcome("client_gone", err);
    await sse.finish();
    return outcome("failed", err);
  } finally {
    // Leaving early (client gone, error) closes the generation stream, which cancels it. Not
    // awaited: a source that is stuck must not hold the response.
    if (!builder.finished) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}
