import { randomBytes } from "node:crypto";
import {
  FinishReason,
  type GenerateFinished,
  type GenerateResponse,
  type GenerateStarted,
  type PromptToken,
  type TokenLogprob,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import type { CompletionUsage } from "../schemas/chat-response.js";
import type { CompletionFinishReason, CompletionLogprobs, TextCompletion, TextCompletionChunk } from "../schemas/completion-response.js";
import { type EventChunker, IncompleteGeneration } from "./generation-stream.js";
import { codePoints, TextOffsets } from "./text-offsets.js";

/**
 * Inference Generate events of a raw prompt → OpenAI text_completion objects: the whole
 * completion (JSON) and the chunks of a stream (SSE, same object with text deltas).
 */

export type { CompletionLogprobs, TextCompletion, TextCompletionChunk } from "../schemas/completion-response.js";

/** What every object of one completion shares, and what the request asked to be shown. */
export interface TextCompletionMeta {
  /** `cmpl-…` */
  id: string;
  /** Unix seconds. */
  created: number;
  /** The model id to show until the Started event names the one that answers. */
  model: string;
  /** The prompt as the client sent it, which `echo` puts before the reply. */
  prompt: string;
  echo: boolean;
  /** Alternatives per token when logprobs were asked for (0 to 5). */
  logprobs: number | undefined;
}

export function newTextCompletionId(): string {
  return `cmpl-${randomBytes(18).toString("base64url")}`;
}

export function createTextCompletionMeta(
  init: Omit<TextCompletionMeta, "id" | "created"> & { id?: string; created?: number },
): TextCompletionMeta {
  return { ...init, id: init.id ?? newTextCompletionId(), created: init.created ?? Math.floor(Date.now() / 1000) };
}

const emptyLogprobs = (): CompletionLogprobs => ({ tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });

/** The prompt's tokens (echo): listed, not scored, so their logprobs are null. */
function promptLogprobs(tokens: readonly PromptToken[], offsets: TextOffsets): CompletionLogprobs {
  const out = emptyLogprobs();
  for (const t of tokens) {
    out.tokens.push(t.token);
    out.token_logprobs.push(null);
    out.top_logprobs.push(null);
    out.text_offset.push(offsets.next(t.bytes));
  }
  return out;
}

/**
 * A token's alternatives as OpenAI's legacy map, text → logprob: the top ones best first, then
 * the token itself if it is not among them (so up to logprobs + 1 entries, as OpenAI says).
 * Two alternatives that read the same keep the first, more probable one.
 */
function topMap(entry: TokenLogprob): Record<string, number> {
  const pairs: [string, number][] = [];
  const seen = new Set<string>();
  for (const { token, logprob } of [...entry.topLogprobs, { token: entry.token, logprob: entry.logprob }]) {
    if (seen.has(token)) continue;
    seen.add(token);
    pairs.push([token, logprob]);
  }
  // fromEntries defines own properties: a token such as "__proto__" stays a key.
  return Object.fromEntries(pairs);
}

function replyLogprobs(entries: readonly TokenLogprob[], offsets: TextOffsets): CompletionLogprobs {
  const out = emptyLogprobs();
  for (const entry of entries) {
    out.tokens.push(entry.token);
    out.token_logprobs.push(entry.logprob);
    out.top_logprobs.push(topMap(entry));
    out.text_offset.push(offsets.next(entry.bytes));
  }
  return out;
}

function append(into: CompletionLogprobs, more: CompletionLogprobs): void {
  into.tokens.push(...more.tokens);
  into.token_logprobs.push(...more.token_logprobs);
  into.top_logprobs.push(...more.top_logprobs);
  into.text_offset.push(...more.text_offset);
}

/** A raw prompt's reply has no tool calls: it ends at a stop (end of text, stop sequence) or at the length. */
function finishReasonName(reason: FinishReason): CompletionFinishReason {
  return reason === FinishReason.LENGTH ? "length" : "stop";
}

function usageOf(finished: GenerateFinished, promptTokens: number): CompletionUsage {
  const prompt = finished.usage?.promptTokens || promptTokens;
  const completion = finished.usage?.completionTokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The logprobs of one completion as its events arrive: the echoed prompt's tokens, then the reply's. */
function logprobsTracker(meta: TextCompletionMeta) {
  const promptOffsets = new TextOffsets(0);
  const replyOffsets = new TextOffsets(meta.echo ? codePoints(meta.prompt) : 0);
  return {
    ofStarted: (started: GenerateStarted) => promptLogprobs(meta.echo ? started.tokenizedPrompt : [], promptOffsets),
    ofEntries: (entries: readonly TokenLogprob[]) => replyLogprobs(entries, replyOffsets),
  };
}

/** The whole text_completion object of a finished generation. */
export function textCompletionFromEvents(events: Iterable<GenerateResponse>, meta: TextCompletionMeta): TextCompletion {
  let started: GenerateStarted | undefined;
  let finished: GenerateFinished | undefined;
  let text = meta.echo ? meta.prompt : "";
  const tracker = logprobsTracker(meta);
  const logprobs = emptyLogprobs();
  for (const { event } of events) {
    switch (event.case) {
      case "started":
        started = event.value;
        if (meta.logprobs !== undefined) append(logprobs, tracker.ofStarted(event.value));
        break;
      case "delta":
        text += event.value.content;
        if (meta.logprobs !== undefined) append(logprobs, tracker.ofEntries(event.value.logprobs));
        break;
      case "finished":
        finished = event.value;
        break;
    }
  }
  if (finished === undefined) throw new IncompleteGeneration();
  return {
    id: meta.id,
    object: "text_completion",
    created: meta.created,
    model: started?.model || meta.model,
    choices: [
      { text, index: 0, logprobs: meta.logprobs !== undefined ? logprobs : null, finish_reason: finishReasonName(finished.finishReason) },
    ],
    usage: usageOf(finished, started?.promptTokens ?? 0),
  };
}

/** Collects a Generate stream into the text_completion object. */
export async function collectTextCompletion(events: AsyncIterable<GenerateResponse>, meta: TextCompletionMeta): Promise<TextCompletion> {
  const all: GenerateResponse[] = [];
  for await (const event of events) all.push(event);
  return textCompletionFromEvents(all, meta);
}

/**
 * The chunks of one streamed completion, event by event: with `echo`, the prompt first (and
 * its tokens, with logprobs); a chunk per delta with its text (and its tokens' logprobs); then
 * one chunk with the finish_reason. Usage as chat's (chat-response.ts): on that last chunk, or
 * with `include_usage` in one more chunk with `choices: []`.
 */
export function createTextChunker(meta: TextCompletionMeta, options: { includeUsage?: boolean } = {}): EventChunker<TextCompletionChunk> {
  let model = meta.model;
  let deltasSent = 0;
  const usage: { promptTokens: number; completionTokens: number | undefined } = { promptTokens: 0, completionTokens: undefined };
  const tracker = logprobsTracker(meta);

  const chunk = (
    text: string,
    logprobs: CompletionLogprobs | null,
    finishReason: CompletionFinishReason | null = null,
  ): TextCompletionChunk => ({
    id: meta.id,
    object: "text_completion",
    created: meta.created,
    model,
    choices: [{ text, index: 0, logprobs, finish_reason: finishReason }],
  });

  return {
    get usage() {
      return usage;
    },
    get deltasSent() {
      return deltasSent;
    },
    fromEvent({ event }: GenerateResponse): TextCompletionChunk[] {
      switch (event.case) {
        case "started":
          model = event.value.model || model;
          usage.promptTokens = event.value.promptTokens;
          if (!meta.echo) return [];
          return [chunk(meta.prompt, meta.logprobs !== undefined ? tracker.ofStarted(event.value) : null)];
        case "delta": {
          const { content, logprobs } = event.value;
          const asked = meta.logprobs !== undefined;
          if (content === "" && (!asked || logprobs.length === 0)) return [];
          if (content !== "") deltasSent++;
          return [chunk(content, asked ? tracker.ofEntries(logprobs) : null)];
        }
        case "finished": {
          const final = usageOf(event.value, usage.promptTokens);
          usage.promptTokens = final.prompt_tokens;
          usage.completionTokens = final.completion_tokens;
          const last = chunk("", null, finishReasonName(event.value.finishReason));
          if (options.includeUsage !== true) return [{ ...last, usage: final }];
          return [last, { ...last, choices: [], usage: final }];
        }
        default:
          return [];
      }
    },
  };
}
