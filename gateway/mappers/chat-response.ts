import { randomBytes } from "node:crypto";
import {
  FinishReason,
  type GenerateDelta,
  type GenerateFinished,
  type GenerateResponse,
  type GenerateStarted,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChoiceLogprobs,
  ChunkDelta,
  ChunkToolCall,
  CompletionToolCall,
  CompletionUsage,
  FinishReasonName,
  TokenLogprob,
} from "../schemas/chat-response.js";
import type { SseWriter } from "../sse.js";
import { denoisingOf } from "./denoising.js";
import {
  type EventChunker,
  IncompleteGeneration,
  type StreamErrorBody,
  type StreamOutcome,
  streamGeneration,
} from "./generation-stream.js";

export { IncompleteGeneration, type StreamErrorBody, type StreamOutcome } from "./generation-stream.js";

/**
 * Inference Generate events → OpenAI chat.completion (JSON) and chat.completion.chunk (SSE)
 * objects, and the loop that streams a generation to an SSE writer.
 */

export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChunkToolCall,
  CompletionToolCall,
  CompletionUsage,
  FinishReasonName,
  TokenLogprob,
} from "../schemas/chat-response.js";

/** What every object of one completion shares. */
export interface CompletionMeta {
  /** `chatcmpl-…` */
  id: string;
  /** Unix seconds. */
  created: number;
  /** The model id to show until the Started event names the one that answers. */
  model: string;
  /** Thinking was enabled: `reasoning` is present (possibly empty) on the message. */
  reasoning: boolean;
  /** logprobs were asked for: `choices[].logprobs.content` lists the reply's tokens. */
  logprobs?: boolean;
}

export function newCompletionId(): string {
  return `chatcmpl-${randomBytes(18).toString("base64url")}`;
}

export function createCompletionMeta(init: {
  model: string;
  reasoning: boolean;
  logprobs?: boolean;
  id?: string;
  created?: number;
}): CompletionMeta {
  return {
    id: init.id ?? newCompletionId(),
    created: init.created ?? Math.floor(Date.now() / 1000),
    model: init.model,
    reasoning: init.reasoning,
    logprobs: init.logprobs ?? false,
  };
}

/** GenerateDelta.logprobs → OpenAI's entries (`bytes` as a list of numbers). */
export function logprobEntries(entries: readonly GenerateDelta["logprobs"][number][]): TokenLogprob[] {
  return entries.map((e) => ({
    token: e.token,
    logprob: e.logprob,
    bytes: [...e.bytes],
    top_logprobs: e.topLogprobs.map((t) => ({ token: t.token, logprob: t.logprob, bytes: [...t.bytes] })),
  }));
}

function finishReasonName(reason: FinishReason, sawToolCall: boolean): FinishReasonName {
  switch (reason) {
    case FinishReason.LENGTH:
      return "length";
    case FinishReason.TOOL_CALLS:
      return "tool_calls";
    default:
      // A reply that called tools ends with tool_calls, as OpenAI's do.
      return sawToolCall ? "tool_calls" : "stop";
  }
}

function usageOf(finished: GenerateFinished, started: GenerateStarted | undefined): CompletionUsage {
  const prompt = finished.usage?.promptTokens ?? started?.promptTokens ?? 0;
  const completion = finished.usage?.completionTokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The whole chat.completion object of a finished generation. */
export function completionFromEvents(events: Iterable<GenerateResponse>, meta: CompletionMeta): ChatCompletion {
  let started: GenerateStarted | undefined;
  let finished: GenerateFinished | undefined;
  let content = "";
  let reasoning = "";
  const tokens: TokenLogprob[] = [];
  const calls = new Map<number, CompletionToolCall>();
  for (const { event } of events) {
    switch (event.case) {
      case "started":
        started = event.value;
        break;
      case "delta":
        content += event.value.content;
        reasoning += event.value.reasoning;
        if (meta.logprobs) tokens.push(...logprobEntries(event.value.logprobs));
        for (const piece of event.value.toolCalls) {
          const call = calls.get(piece.index);
          if (call === undefined) {
            calls.set(piece.index, { id: piece.id, type: "function", function: { name: piece.name, arguments: piece.arguments } });
          } else {
            call.id ||= piece.id;
            call.function.name ||= piece.name;
            call.function.arguments += piece.arguments;
          }
        }
        break;
      case "finished":
        finished = event.value;
        break;
    }
  }
  if (finished === undefined) throw new IncompleteGeneration();
  const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  const message: ChatCompletion["choices"][number]["message"] = {
    role: "assistant",
    content: content === "" && toolCalls.length > 0 ? null : content,
  };
  if (meta.reasoning || reasoning !== "") message.reasoning = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: started?.model || meta.model,
    choices: [
      {
        index: 0,
        message,
        finish_reason: finishReasonName(finished.finishReason, toolCalls.length > 0),
        logprobs: meta.logprobs ? { content: tokens, refusal: null } : null,
      },
    ],
    usage: usageOf(finished, started),
  };
}

/** Collects a Generate stream into the chat.completion object. */
export async function collectCompletion(events: AsyncIterable<GenerateResponse>, meta: CompletionMeta): Promise<ChatCompletion> {
  const all: GenerateResponse[] = [];
  for await (const event of events) all.push(event);
  return completionFromEvents(all, meta);
}

/**
 * Builds the chunks of one streamed completion, event by event: the role first, then a chunk
 * per delta with its content / reasoning / tool-call pieces (and logprobs entries), then one
 * chunk with the finish_reason. The usage goes on that last chunk, so the last event before
 * [DONE] carries it (the API document) while every chunk has a choice (the common client loop
 * reads `choices[0]`); with `include_usage`, as OpenAI does, it comes instead in one more
 * chunk with `choices: []`.
 */
export type ChunkBuilder = EventChunker<ChatCompletionChunk>;

export function createChunkBuilder(meta: CompletionMeta, options: { includeUsage?: boolean } = {}): ChunkBuilder {
  let model = meta.model;
  let roleSent = false;
  let sawToolCall = false;
  let deltasSent = 0;
  const usage: { promptTokens: number; completionTokens: number | undefined } = { promptTokens: 0, completionTokens: undefined };

  const chunk = (
    delta: ChunkDelta,
    finishReason: FinishReasonName | null = null,
    logprobs: ChoiceLogprobs = null,
  ): ChatCompletionChunk => ({
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs }],
  });
  const roleChunk = (): ChatCompletionChunk[] => {
    if (roleSent) return [];
    roleSent = true;
    return [chunk({ role: "assistant", content: "" })];
  };

  return {
    get usage() {
      return usage;
    },
    get deltasSent() {
      return deltasSent;
    },
    fromEvent({ event }: GenerateResponse): ChatCompletionChunk[] {
      switch (event.case) {
        case "started":
          model = event.value.model || model;
          usage.promptTokens = event.value.promptTokens;
          return roleChunk();
        case "delta": {
          const delta = deltaOf(event.value);
          const entries = meta.logprobs && event.value.logprobs.length > 0 ? logprobEntries(event.value.logprobs) : undefined;
          if (delta === null && entries === undefined) return [];
          if (delta !== null) deltasSent++;
          if (delta?.tool_calls !== undefined) sawToolCall = true;
          return [...roleChunk(), chunk(delta ?? {}, null, entries === undefined ? null : { content: entries, refusal: null })];
        }
        case "step":
          return [{ ...chunk({}), choices: [], denoising: denoisingOf(event.value) }];
        case "finished": {
          const final = usageOf(event.value, undefined);
          if (final.prompt_tokens === 0) {
            final.prompt_tokens = usage.promptTokens;
            final.total_tokens = final.prompt_tokens + final.completion_tokens;
          }
          usage.promptTokens = final.prompt_tokens;
          usage.completionTokens = final.completion_tokens;
          const last = chunk({}, finishReasonName(event.value.finishReason, sawToolCall));
          if (options.includeUsage !== true) return [...roleChunk(), { ...last, usage: final }];
          const usageChunk: ChatCompletionChunk = { ...chunk({}), choices: [], usage: final };
          return [...roleChunk(), last, usageChunk];
        }
        default:
          return [];
      }
    },
  };
}

function deltaOf(delta: GenerateDelta): ChunkDelta | null {
  const out: ChunkDelta = {};
  if (delta.content !== "") out.content = delta.content;
  if (delta.reasoning !== "") out.reasoning = delta.reasoning;
  if (delta.toolCalls.length > 0) {
    out.tool_calls = delta.toolCalls.map((piece) => {
      const call: ChunkToolCall = { index: piece.index, function: { arguments: piece.arguments } };
      if (piece.id !== "") {
        call.id = piece.id;
        call.type = "function";
      }
      if (piece.name !== "") call.function.name = piece.name;
      return call;
    });
  }
  return Object.keys(out).length === 0 ? null : out;
}

/** Streams one generation as chat.completion.chunk events (generation-stream.ts). */
export function streamCompletion(
  sse: SseWriter,
  events: AsyncIterable<GenerateResponse>,
  meta: CompletionMeta,
  toErrorBody: (err: unknown) => StreamErrorBody,
  options: { includeUsage?: boolean } = {},
): Promise<StreamOutcome> {
  return streamGeneration(sse, events, createChunkBuilder(meta, options), toErrorBody);
}
