import type { Logger } from "../../../lib/logger.js";
import { resolveMaxTokens } from "../../../lib/text-limits.js";
import { StopMatcher } from "../decoder/reply-text.js";
import type { BlockText } from "../decoder/sequence.js";
import type { ModelGrammarOptions } from "../grammar/request-grammar.js";
import type { GrammarReport, SequenceGrammar } from "../grammar/sequence-grammar.js";
import { countPromptTokens, type GenerationPrompt, generationPrompt, rawPromptIds } from "./generation-prompt.js";
import { tokenizedPrompt } from "../prompt/raw-prompt.js";
import { stepEvent } from "../reply/denoise-event.js";
import { tokenLogprobs } from "../reply/logprob-entries.js";
import { createRawReplyParser, createReplyParser, mergeDeltas, type ReplyParser } from "../reply/reply-parser.js";
import { scoreSuffixes } from "../score/score.js";
import { ScoreTimer } from "../score/score-timing.js";
import type { GenerationRequest, ModelEngine, ReplyChunk, ReplyDelta, ReplyEvent } from "../core/model-engine.js";
import { PromptTooLong } from "../core/engine-errors.js";
import { checkStopSequences, logprobsAsked } from "../core/reply-options.js";
import type { ModelRuntime } from "./runtime.js";
import type { GenerationEvent } from "./scheduler.js";
import { replyGrammar } from "./reply-grammar.js";

export interface MaskEngineOptions {
  /** Grammar-constrained decoding: compiled-grammar cache, compile budget, threads, number bounds, loop guard and budgets. */
  grammar: ModelGrammarOptions;
  /** Where each reply's `generation finished` line goes. */
  logger?: Logger | undefined;
}

/**
 * The engine of a mask model (contract v1/v2): chat or raw prompts, the reply's grammar, block
 * diffusion on the runtime's step loop, the reply parser over each committed block, and Score.
 */
export function createMaskEngine(runtime: ModelRuntime, options: MaskEngineOptions): ModelEngine {
  const { grammar, logger } = options;
  const { config, decision } = runtime.model;
  return {
    name: runtime.name,
    servingIds: runtime.servingIds,
    info: () => ({
      maxPositions: config.maxPositions,
      blockSize: config.blockSize,
      capabilities: config.capabilities,
      ...(decision !== undefined ? { decision } : {}),
      slots: { total: runtime.scheduler.slots.total, free: runtime.scheduler.slots.free },
    }),
    countTokens: (request) => countPromptTokens(runtime, request, grammar.limits),
    generate: (request, signal) => generateReply(runtime, grammar, logger, request, signal),
    score: async (input, signal) => {
      const timer = new ScoreTimer();
      // Counting runs no model: it takes no decision slot.
      const out =
        input.countOnly === true
          ? await scoreSuffixes(runtime, input, signal, timer)
          : await runtime.decisions.run(input.client, signal, (lane, queueMs) => {
              timer.timing.queueMs = queueMs;
              return scoreSuffixes(runtime, input, signal, timer, lane);
            });
      if (input.countOnly !== true)
        logger?.debug({ model: runtime.name, suffixes: input.suffixes.length, ...timer.timing }, "score timing");
      return out;
    },
    close: () => runtime.close(),
  };
}

/** A generation's prompt and how its reply is read: the reply's grammar, if any, starts once max_tokens is resolved. */
interface PreparedGeneration {
  ids: number[];
  parser: ReplyParser;
  startGrammar: ((maxTokens: number) => Promise<SequenceGrammar | undefined>) | undefined;
  choice: GenerationPrompt["choice"];
}

/** A chat request's prompt: rendered, tokenized, its reply parsed as chat, under its grammar if any. */
async function chatGeneration(
  runtime: ModelRuntime,
  grammar: ModelGrammarOptions,
  req: GenerationRequest,
  signal: AbortSignal,
): Promise<PreparedGeneration> {
  const input = { messages: req.messages, tools: req.tools, options: req.options };
  const { prompt, ids, choice } = await generationPrompt(runtime, req.model, input, grammar.limits, signal);
  const parser = createReplyParser({ ...prompt.parser, tags: runtime.model.config.specialTokens });
  return { ids, parser, startGrammar: (maxTokens) => replyGrammar(runtime, grammar, prompt, input, maxTokens), choice };
}

/** A raw prompt (legacy completions): tokenized as it is, its reply passed on as raw text. */
async function rawGeneration(runtime: ModelRuntime, req: GenerationRequest, raw: string): Promise<PreparedGeneration> {
  return { ids: await rawPromptIds(runtime, req, raw), parser: createRawReplyParser(), startGrammar: undefined, choice: undefined };
}

async function* generateReply(
  runtime: ModelRuntime,
  grammarOptions: ModelGrammarOptions,
  logger: Logger | undefined,
  req: GenerationRequest,
  signal: AbortSignal,
): AsyncGenerator<ReplyEvent> {
  const started = performance.now();
  const options = req.options;
  const stop = options?.stop ?? [];
  checkStopSequences(stop);

  const { ids, parser, startGrammar, choice } =
    req.rawPrompt === undefined
      ? await chatGeneration(runtime, grammarOptions, req, signal)
      : await rawGeneration(runtime, req, req.rawPrompt);
  const context = runtime.decode.maxPositions;
  // Resolved once here; the grammar's reply budget and the decoder take this value.
  const maxTokens = resolveMaxTokens(options?.maxTokens, {}, { promptTokens: ids.length, maxPositions: context });
  // A schema the grammar cannot take is named before anything else about the request.
  const grammar = await startGrammar?.(maxTokens);
  if (ids.length >= context) {
    grammar?.dispose();
    throw new PromptTooLong(`prompt too long: ${ids.length} tokens, the context of model "${req.model}" is ${context} tokens`);
  }
  const tokenizer = runtime.model.tokenizer;
  const logprobs = logprobsAsked(options);
  let events: AsyncIterable<GenerationEvent>;
  try {
    events = await runtime.scheduler.generate(
      {
        prompt: ids,
        maxTokens,
        policy: runtime.policyFor(req.model),
        stops: new StopMatcher(stop),
        decode: tokenizer.decode,
        ...(logprobs !== undefined ? { logprobs } : {}),
        ...(grammar !== undefined ? { grammar } : {}),
      },
      signal,
      options?.includeDenoising ?? false,
    );
  } catch (err) {
    grammar?.dispose();
    throw err;
  }

  // Whatever ends this reply (the caller leaving, an error) also ends the sequence.
  const iterator = events[Symbol.asyncIterator]();
  try {
    const tokenized = options?.includeTokenizedPrompt === true ? tokenizedPrompt(tokenizer, ids) : [];
    yield { type: "started", promptTokens: ids.length, tokenizedPrompt: tokenized };
    const chunkOf = (d: ReplyDelta, block: BlockText) => replyChunk(d, block, tokenLogprobs(tokenizer, block.logprobs));
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) return;
      const event = next.value;
      if (event.type === "step") {
        yield { type: "step", step: stepEvent(event.step, tokenizer.decode) };
        continue;
      }
      if (event.type === "block") {
        const chunk = chunkOf(parser.push(event.block.text), event.block);
        if (chunk !== undefined) yield { type: "chunk", chunk };
        continue;
      }
      const { finished, forwardPasses } = event;
      const tail = parser.push(finished.last.text);
      const end = parser.finish();
      const chunk = chunkOf(mergeDeltas(tail, end), finished.last);
      if (chunk !== undefined) yield { type: "chunk", chunk };
      const reason = finished.reason === "stop" && end.sawToolCall ? "tool_calls" : finished.reason;
      if (finished.grammar !== undefined) countConstrained(runtime, reason, finished.grammar);
      if (finished.grammar?.deadEnd === true) {
        logger?.warn({ requestId: req.requestId, model: req.model }, "grammar dead end: the reply ends with what was valid");
      }
      const completionTokens = finished.completionTokens;
      logger?.info(
        {
          requestId: req.requestId,
          model: req.model,
          promptTokens: ids.length,
          completionTokens,
          finishReason: reason,
          forwardPasses,
          ms: Math.round(performance.now() - started),
          ...(finished.grammar !== undefined ? { grammar: { ...finished.grammar, ms: Math.round(finished.grammar.ms) } } : {}),
          ...(choice !== undefined
            ? { requiredTool: { tool: choice.tool, candidates: choice.scores.length, scoredTokens: choice.scoredTokens, ms: choice.ms } }
            : {}),
        },
        "generation finished",
      );
      yield { type: "finished", reason, promptTokens: ids.length, completionTokens, forwardPasses };
    }
  } finally {
    await iterator.return?.();
  }
}

/** A block's piece of the reply, or undefined when it adds nothing. */
function replyChunk(d: ReplyDelta, block: BlockText, logprobs: ReplyChunk["logprobs"]): ReplyChunk | undefined {
  if (d.content === "" && d.reasoning === "" && d.toolCalls.length === 0 && logprobs.length === 0) return undefined;
  return { ...d, blockIndex: block.blockIndex, completionTokens: block.replyTokens, logprobs };
}

/** A constrained reply's end, and what the loop guard and the budgets did in it (metrics). */
function countConstrained(runtime: ModelRuntime, reason: string, grammar: GrammarReport): void {
  const metrics = runtime.metrics;
  if (metrics === undefined) return;
  metrics.constrainedReplies.inc({ model: runtime.name, finish_reason: reason });
  if (grammar.loopGuard > 0) metrics.loopGuardInterventions.inc({ model: runtime.name, rule: "loop" }, grammar.loopGuard);
  if (grammar.budget > 0) metrics.loopGuardInterventions.inc({ model: runtime.name, rule: "budget" }, grammar.budget);
}
