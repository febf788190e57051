import type { GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { SseWriter } from "../sse.js";

/**
 * The loop that streams one generation to an SSE writer, whatever the shape of its chunks
 * (chat.completion.chunk, text_completion): a chunker turns each Generate event into the
 * chunks to send.
 */

/** A generation that ended without its Finished event. */
export class IncompleteGeneration extends Error {
  constructor() {
    super("the generation ended without finishing");
    this.name = "IncompleteGeneration";
  }
}

/** Turns the events of one generation into the chunks a client is sent, counting usage as it goes. */
export interface EventChunker<Chunk> {
  fromEvent(event: GenerateResponse): Chunk[];
  /** Prompt tokens (from Started) and completion tokens (from Finished) seen so far. */
  readonly usage: { promptTokens: number; completionTokens: number | undefined };
  /** Deltas that carried something, i.e. blocks the client was sent. */
  readonly deltasSent: number;
}

/** The OpenAI error object sent in a stream's error event. */
export interface StreamErrorBody {
  message: string;
  type: string;
  code: string | null;
  param?: string | null;
}

export interface StreamOutcome {
  /** `done`: [DONE] sent; `client_gone`: the client left or stalled; `failed`: an error event ended it. */
  outcome: "done" | "client_gone" | "failed";
  promptTokens: number;
  /** Known when the generation finished. */
  completionTokens: number | undefined;
  /** Deltas the client was sent (one per committed block that carried text). */
  deltasSent: number;
  error?: unknown;
}

/**
 * Streams one generation as SSE. The first event is awaited before anything is written, so a
 * refusal (overload, quota, bad request from the model) still gets its own HTTP status: that
 * error is thrown, with nothing sent. Once the stream is open every failure ends it with an
 * error event, never a hang. The caller must create `events` with `sse.signal` (or a signal
 * that follows it) so a client that leaves cancels the generation.
 */
export async function streamGeneration<Chunk>(
  sse: SseWriter,
  events: AsyncIterable<GenerateResponse>,
  chunker: EventChunker<Chunk>,
  toErrorBody: (err: unknown) => StreamErrorBody,
): Promise<StreamOutcome> {
  const outcome = (kind: StreamOutcome["outcome"], error?: unknown): StreamOutcome => ({
    outcome: kind,
    promptTokens: chunker.usage.promptTokens,
    completionTokens: chunker.usage.completionTokens,
    deltasSent: chunker.deltasSent,
    ...(error === undefined ? {} : { error }),
  });

  const iterator = events[Symbol.asyncIterator]();
  const first = await iterator.next();
  sse.open();
  let finished = false;
  try {
    for (let step = first; !step.done; step = await iterator.next()) {
      if (step.value.event.case === "finished") finished = true;
      for (const chunk of chunker.fromEvent(step.value)) {
        if (!(await sse.send(chunk))) return outcome("client_gone");
      }
    }
    if (!finished) throw new IncompleteGeneration();
    await sse.done();
    return outcome("done");
  } catch (err) {
    if (sse.closed) return outcome("client_gone", err);
    await sse.fail(toErrorBody(err));
    return outcome("failed", err);
  } finally {
    // Leaving early (client gone, error) closes the generation stream, which cancels it. Not
    // awaited: a source that is stuck must not hold the response.
    if (!finished) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}
