import type { GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { SseWriter } from "../sse.js";

/**
 * The loop that streams one generation to an SSE writer, whatever the shape of its chunks
 * (chat.completion.chunk, text_completion, the Responses API's events): a chunker turns each
 * Generate event into the chunks to send, and a framing says how they are written and how the
 * stream ends (`data:` lines and `[DONE]`, or named events and a terminal one).
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
  /** Deltas that carried something, i.e. blocks the client was sent (chunkers that count them). */
  readonly deltasSent?: number;
}

/** How the chunks of a stream are written, and how it ends. */
export interface StreamFraming<Chunk> {
  /** Writes one chunk; false when the client is gone. */
  send(sse: SseWriter, chunk: Chunk): Promise<boolean>;
  /** The chunks sent once the generation finished, before the stream ends. */
  closing(): Promise<Chunk[]>;
  /** Ends a stream whose chunks were all sent. */
  end(sse: SseWriter): Promise<void>;
  /** Ends an open stream that failed; false when the client left meanwhile. */
  fail(sse: SseWriter, error: StreamErrorBody): Promise<boolean>;
}

/** OpenAI's chat and completion streams: each chunk a `data:` line, `[DONE]` last, `data: {"error": …}` on failure. */
export function dataLines<Chunk>(): StreamFraming<Chunk> {
  return {
    send: (sse, chunk) => sse.send(chunk),
    closing: async () => [],
    end: (sse) => sse.done(),
    fail: async (sse, error) => {
      await sse.fail(error);
      return true;
    },
  };
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
  /** Deltas the client was sent (one per committed block that carried text), when the chunker counts them. */
  deltasSent?: number;
  error?: unknown;
}

/**
 * Streams one generation as SSE in `framing` (by default `data:` lines). The first event is awaited before anything is written, so a
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
  framing: StreamFraming<Chunk> = dataLines(),
): Promise<StreamOutcome> {
  const outcome = (kind: StreamOutcome["outcome"], error?: unknown): StreamOutcome => ({
    outcome: kind,
    promptTokens: chunker.usage.promptTokens,
    completionTokens: chunker.usage.completionTokens,
    ...(chunker.deltasSent === undefined ? {} : { deltasSent: chunker.deltasSent }),
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
        if (!(await framing.send(sse, chunk))) return outcome("client_gone");
      }
    }
    if (!finished) throw new IncompleteGeneration();
    for (const chunk of await framing.closing()) if (!(await framing.send(sse, chunk))) return outcome("client_gone");
    await framing.end(sse);
    return outcome("done");
  } catch (err) {
    if (sse.closed) return outcome("client_gone", err);
    if (!(await framing.fail(sse, toErrorBody(err)))) return outcome("client_gone", err);
    return outcome("failed", err);
  } finally {
    // Leaving early (client gone, error) closes the generation stream, which cancels it. Not
    // awaited: a source that is stuck must not hold the response.
    if (!finished) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}
