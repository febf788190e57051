import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  FinishReason,
  GenerateDeltaSchema,
  ResponseFormatType,
  GenerateResponseSchema,
  type InferenceService,
  ToolCallDeltaSchema,
  type CountTokensRequest,
  type GenerateDelta,
  type GenerateRequest,
  type GenerateResponse,
  type GetModelInfoRequest,
  type ScoreRequest,
  type TokenLogprob,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import type { Logger } from "../../lib/logger.js";
import { buildChatPrompt, type ChatInput, type ChatPrompt, type ChatTemplateVariables } from "./prompt/chat-prompt.js";
import type { BlockText } from "./decoder/sequence.js";
import type { CommittedLogprob } from "./decoder/logprobs.js";
import { StopMatcher } from "./decoder/reply-text.js";
import { withConnectErrors } from "./connect-errors.js";
import { canvasCountTokens, canvasGenerate } from "./canvas/canvas-service.js";
import { canvasScore } from "./canvas/canvas-score.js";
import { effectiveMaxTokens, type ModelEngine } from "./engine/engine.js";
import { InvalidRequest, ModelNotServed, PromptTooLong } from "./engine/engine-errors.js";
import { DEFAULT_GRAMMAR_WORKERS, grammarPoolFor } from "./grammar/grammar-client.js";
import { DEFAULT_GRAMMAR_OPTIONS, type GrammarOptions } from "./grammar/model-grammars.js";
import { bannedTokenIds } from "./decoder/unmask.js";
import { grammarSpecOf, sequenceGrammar } from "./grammar/request-grammar.js";
import { checkSchema, SchemaError } from "./grammar/schema-check.js";
import type { GrammarReport } from "./grammar/sequence-grammar.js";
import type { ModelPool } from "./engine/model-pool.js";
import { stepEvent } from "./reply/denoise-event.js";
import { tokenLogprobs } from "./reply/logprob-entries.js";
import { checkRawPromptRequest, tokenizedPrompt } from "./prompt/raw-prompt.js";
import { createRawReplyParser, createReplyParser, type ReplyDelta } from "./reply/reply-parser.js";
import { chooseRequiredTool, longestForcedPrompt, type RenderTemplate } from "./prompt/required-tool.js";
import type { GenerationEvent } from "./engine/scheduler.js";
import { scoreSuffixes } from "./score/score.js";
import { chatTextBytes, refuseIfCannotFit } from "./prompt/text-bound.js";
import { TemplateRenderError } from "./prompt/text-ops.js";
import { MAX_GENERATE_STOP_CHARS, MAX_GENERATE_STOP_SEQUENCES, MAX_TOP_LOGPROBS } from "../../lib/text-limits.js";

export interface InferenceDeps {
  pool: ModelPool;
  logger: Logger;
  /** This worker's id, reported in GenerateStarted. */
  workerId: string;
  /** Grammar-constrained decoding: compiled-grammar cache, compile budget, compile threads, number bounds, loop guard and budgets. */
  grammar?: Partial<GrammarOptions> & { workers?: number };
}

const FINISH_REASONS = {
  stop: FinishReason.STOP,
  length: FinishReason.LENGTH,
  tool_calls: FinishReason.TOOL_CALLS,
} as const;

const invalid = (message: string) => new InvalidRequest(message);

/** The inference service; the engine's own errors become Connect errors at this edge (connect-errors.ts). */
export function createInferenceService(deps: InferenceDeps): ServiceImpl<typeof InferenceService> {
  return withConnectErrors(engineService(deps));
}

function engineService({ pool, logger, workerId, grammar }: InferenceDeps): ServiceImpl<typeof InferenceService> {
  const grammarOptions = { ...DEFAULT_GRAMMAR_OPTIONS, workers: DEFAULT_GRAMMAR_WORKERS, ...grammar };

  /** The reply's grammar (InvalidArgument for a schema it cannot enforce), or undefined for free text. */
  async function replyGrammar(engine: ModelEngine, prompt: ChatPrompt, input: ChatInput, promptTokens: number) {
    const spec = grammarSpecOf(prompt, input);
    if (spec === undefined) return undefined;
    const { vocabSize, eosTokenId } = engine.decode;
    const tags = engine.model.config.specialTokens;
    const worker = grammarPoolFor(engine.model.dir, vocabSize, eosTokenId, { ...grammarOptions, tags });
    const thinking = prompt.parser.thinking && prompt.parser.forcedTool === undefined;
    const sequence = await sequenceGrammar(worker, spec, engine.model.tokenizer, {
      thinking,
      threshold: engine.threshold,
      vocab: vocabSize,
      banned: bannedTokenIds(engine.decode),
      tags,
      ...(grammarOptions.finish !== undefined ? { finish: grammarOptions.finish } : {}),
      maxTokens: effectiveMaxTokens(input.options?.maxTokens ?? 0, promptTokens, engine.decode.maxPositions),
      onCompile: (seconds) => engine.metrics?.grammarCompileSeconds.observe({ model: engine.name }, seconds),
    });
    engine.metrics?.constrainedRequests.inc({ model: engine.name, kind: spec.kind });
    return sequence;
  }

  function engineFor(model: string): ModelEngine {
    if (model === "") throw invalid("model is required");
    const engine = pool.engine(model);
    if (engine === undefined) throw new ModelNotServed(`model "${model}" is not served by this worker`);
    return engine;
  }

  /** The model's chat template; a conversation it cannot render is refused (InvalidArgument). */
  function templateOf(engine: ModelEngine): RenderTemplate {
    return (variables) => {
      try {
        return engine.model.renderChat(variables);
      } catch (err) {
        throw invalid(`the chat template cannot render this conversation: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
  }

  /**
   * A conversation that cannot fit the context whatever its tokens is refused before any
   * rendering. A response schema the grammar cannot take is named first (the bound counts it).
   */
  function boundChat(modelId: string, engine: ModelEngine, input: ChatInput): void {
    const format = input.options?.responseFormat;
    const schema = format?.type === ResponseFormatType.JSON_SCHEMA ? format.jsonSchema?.schema : undefined;
    if (schema !== undefined && schema !== null) {
      try {
        checkSchema(schema, "response_format.json_schema.schema", grammarOptions.limits);
      } catch (err) {
        throw err instanceof SchemaError ? invalid(err.message) : err;
      }
    }
    const context = engine.decode.maxPositions;
    const bytes = chatTextBytes(input, context * engine.model.maxTokenBytes);
    refuseIfCannotFit("the conversation", bytes, engine.model.maxTokenBytes, context, modelId);
  }

  /** Renders and tokenizes a conversation off the event loop (the text worker). */
  async function renderEncode(engine: ModelEngine, variables: ChatTemplateVariables): Promise<number[]> {
    try {
      return await engine.model.text.renderEncode(variables);
    } catch (err) {
      if (err instanceof TemplateRenderError) throw invalid(`the chat template cannot render this conversation: ${err.message}`);
      throw err;
    }
  }

  /**
   * The prompt a generation runs on, rendered and tokenized. With tool_choice "required" and
   * several tools, the tool is chosen first (required-tool.ts: one Score readout) and forced.
   */
  async function generationPrompt(modelId: string, engine: ModelEngine, input: ChatInput, signal: AbortSignal) {
    boundChat(modelId, engine, input);
    const built = buildChatPrompt(modelId, engine.model.config.capabilities, input);
    if (built.requiredTools.length === 0) {
      return { prompt: built, ids: await renderEncode(engine, built.variables), choice: undefined };
    }
    const render = templateOf(engine);
    const started = performance.now();
    const choice = await chooseRequiredTool(engine, built, { model: modelId, render }, signal);
    const ms = Math.round(performance.now() - started);
    return { prompt: choice.prompt, ids: await engine.model.text.encode(choice.text), choice: { ...choice, ms } };
  }

  /**
   * CountTokens of a conversation: the tokens of its prompt; with tool_choice "required" and
   * several tools (the tool not chosen yet), the longest of their forced prompts.
   */
  async function countPrompt(modelId: string, engine: ModelEngine, input: ChatInput): Promise<number> {
    boundChat(modelId, engine, input);
    const built = buildChatPrompt(modelId, engine.model.config.capabilities, input);
    if (built.requiredTools.length === 0) return (await renderEncode(engine, built.variables)).length;
    const render = templateOf(engine);
    const tokenizer = engine.model.tokenizer;
    return tokenizer.encode(longestForcedPrompt(tokenizer, built, { model: modelId, render })).length;
  }

  /** A chat request's prompt: rendered, tokenized, its reply parsed as chat, under its grammar if any. */
  async function chatGeneration(req: GenerateRequest, engine: ModelEngine, signal: AbortSignal) {
    const input = { messages: req.messages, tools: req.tools, options: req.options };
    const { prompt, ids, choice } = await generationPrompt(req.model, engine, input, signal);
    // A schema the grammar cannot take is named before anything else about the request.
    const grammar = await replyGrammar(engine, prompt, input, ids.length);
    return { ids, parser: createReplyParser({ ...prompt.parser, tags: engine.model.config.specialTokens }), grammar, choice };
  }

  /** A raw prompt (legacy completions): tokenized as it is, its reply passed on as raw text. */
  async function rawGeneration(req: GenerateRequest, engine: ModelEngine, raw: string) {
    return { ids: await rawPromptIds(req, engine, raw), parser: createRawReplyParser(), grammar: undefined, choice: undefined };
  }

  /** A raw prompt's tokens (Generate and CountTokens): checked, bounded by its bytes, then tokenized on the text worker. */
  async function rawPromptIds(req: GenerateRequest | CountTokensRequest, engine: ModelEngine, raw: string): Promise<number[]> {
    checkRawPromptRequest(req, raw);
    const { maxTokenBytes } = engine.model;
    refuseIfCannotFit("the prompt", Buffer.byteLength(raw), maxTokenBytes, engine.decode.maxPositions, req.model);
    return await engine.model.text.encode(raw);
  }

  return {
    async *generate(req: GenerateRequest, ctx: HandlerContext): AsyncGenerator<GenerateResponse> {
      const canvas = pool.canvas?.(req.model);
      if (canvas !== undefined) return yield* canvasGenerate(canvas, req, ctx, workerId);
      const started = performance.now();
      const engine = engineFor(req.model);
      const options = req.options;
      const stop = options?.stop ?? [];
      if (stop.length > MAX_GENERATE_STOP_SEQUENCES) throw invalid(`stop: at most ${MAX_GENERATE_STOP_SEQUENCES} sequences`);
      if (stop.some((s) => s.length > MAX_GENERATE_STOP_CHARS))
        throw invalid(`stop: each sequence at most ${MAX_GENERATE_STOP_CHARS} characters`);

      const { ids, parser, grammar, choice } =
        req.rawPrompt === undefined ? await chatGeneration(req, engine, ctx.signal) : await rawGeneration(req, engine, req.rawPrompt);
      const context = engine.decode.maxPositions;
      if (ids.length >= context) {
        grammar?.dispose();
        throw new PromptTooLong(`prompt too long: ${ids.length} tokens, the context of model "${req.model}" is ${context} tokens`);
      }
      const maxTokens = effectiveMaxTokens(options?.maxTokens ?? 0, ids.length, context);
      const tokenizer = engine.model.tokenizer;
      const logprobs = options?.logprobs === true ? { top: Math.min(options.topLogprobs, MAX_TOP_LOGPROBS) } : undefined;
      const entriesOf = (committed: CommittedLogprob[] | undefined) => tokenLogprobs(tokenizer, committed);
      let events: AsyncIterable<GenerationEvent>;
      try {
        events = await engine.scheduler.generate(
          {
            prompt: ids,
            maxTokens,
            policy: engine.policyFor(req.model),
            stops: new StopMatcher(stop),
            decode: tokenizer.decode,
            ...(logprobs !== undefined ? { logprobs } : {}),
            ...(grammar !== undefined ? { grammar } : {}),
          },
          ctx.signal,
          options?.includeDenoising ?? false,
        );
      } catch (err) {
        grammar?.dispose();
        throw err;
      }

      // Whatever ends this handler (the client leaving, an error) also ends the sequence.
      const iterator = events[Symbol.asyncIterator]();
      try {
        yield create(GenerateResponseSchema, {
          event: {
            case: "started",
            value: {
              model: req.model,
              promptTokens: ids.length,
              workerId,
              tokenizedPrompt: options?.includeTokenizedPrompt === true ? tokenizedPrompt(tokenizer, ids) : [],
            },
          },
        });

        for (;;) {
          const next = await iterator.next();
          if (next.done === true) return;
          const event = next.value;
          if (event.type === "step") {
            yield create(GenerateResponseSchema, { event: { case: "step", value: stepEvent(event.step, tokenizer.decode) } });
            continue;
          }
          if (event.type === "block") {
            const delta = deltaOf(parser.push(event.block.text), event.block, entriesOf(event.block.logprobs));
            if (delta !== undefined) yield create(GenerateResponseSchema, { event: { case: "delta", value: delta } });
            continue;
          }
          const { finished, forwardPasses } = event;
          const tail = parser.push(finished.last.text);
          const end = parser.finish();
          const delta = deltaOf(merge(tail, end), finished.last, entriesOf(finished.last.logprobs));
          if (delta !== undefined) yield create(GenerateResponseSchema, { event: { case: "delta", value: delta } });
          const reason = finished.reason === "stop" && end.sawToolCall ? "tool_calls" : finished.reason;
          if (finished.grammar !== undefined) countConstrained(engine, reason, finished.grammar);
          if (finished.grammar?.deadEnd === true) {
            logger.warn({ requestId: req.requestId, model: req.model }, "grammar dead end: the reply ends with what was valid");
          }
          const completionTokens = finished.completionTokens;
          logger.info(
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
                ? {
                    requiredTool: { tool: choice.tool, candidates: choice.scores.length, scoredTokens: choice.scoredTokens, ms: choice.ms },
                  }
                : {}),
            },
            "generation finished",
          );
          yield create(GenerateResponseSchema, {
            event: {
              case: "finished",
              value: {
                finishReason: FINISH_REASONS[reason],
                usage: { promptTokens: ids.length, completionTokens, totalTokens: ids.length + completionTokens },
                forwardPasses,
              },
            },
          });
        }
      } finally {
        await iterator.return?.();
      }
    },

    async score(req: ScoreRequest, ctx: HandlerContext) {
      const input = {
        prefix: req.prefix,
        suffixes: req.suffixes.map((s) => ({ text: s.text, labels: s.labels })),
        countOnly: req.countOnly,
      };
      const canvas = pool.canvas?.(req.model);
      const out =
        canvas !== undefined
          ? await canvasScore(canvas, input, canvas.scoreLimits, ctx.signal)
          : await scoreSuffixes(engineFor(req.model), input, ctx.signal);
      return {
        results: out.results.map((r) => ({ logits: r.logits, suffixTokens: r.suffixTokens })),
        prefixTokens: out.prefixTokens,
        inputTokens: out.inputTokens,
      };
    },

    async countTokens(req: CountTokensRequest) {
      const canvas = pool.canvas?.(req.model);
      if (canvas !== undefined) return await canvasCountTokens(canvas, req);
      const engine = engineFor(req.model);
      if (req.rawPrompt !== undefined) return { tokens: (await rawPromptIds(req, engine, req.rawPrompt)).length };
      if (req.messages.length === 0) return { tokens: (await engine.model.text.encode(req.text)).length };
      return { tokens: await countPrompt(req.model, engine, { messages: req.messages, tools: req.tools, options: req.options }) };
    },

    getModelInfo(req: GetModelInfoRequest) {
      const canvas = pool.canvas?.(req.model);
      if (canvas !== undefined) {
        const { config } = canvas.model;
        const common = { model: req.model, maxPositions: config.maxPositions, blockSize: config.canvasLength };
        const slots = { slotsTotal: canvas.slots.total, slotsFree: canvas.slots.free };
        const decision = canvas.model.decision;
        const supports = { supportsImages: canvas.images !== undefined, supportsTools: false, supportsThinking: false };
        return { ...common, ...slots, ...supports, ...(decision !== undefined ? { decision } : {}) };
      }
      const engine = engineFor(req.model);
      const { config, decision } = engine.model;
      return {
        model: req.model,
        maxPositions: config.maxPositions,
        blockSize: config.blockSize,
        supportsImages: config.capabilities.images,
        supportsTools: config.capabilities.tools,
        supportsThinking: config.capabilities.thinking,
        ...(decision !== undefined ? { decision } : {}),
        slotsTotal: engine.scheduler.slots.total,
        slotsFree: engine.scheduler.slots.free,
      };
    },
  };
}

/** Two parser outputs as one; pieces of the same tool call are joined. */
function merge(a: ReplyDelta, b: ReplyDelta): ReplyDelta {
  const toolCalls = a.toolCalls.map((c) => ({ ...c }));
  for (const piece of b.toolCalls) {
    const same = toolCalls.find((c) => c.index === piece.index);
    if (same === undefined) {
      toolCalls.push({ ...piece });
    } else {
      same.arguments += piece.arguments;
      if (same.id === undefined && piece.id !== undefined) same.id = piece.id;
      if (same.name === undefined && piece.name !== undefined) same.name = piece.name;
    }
  }
  return { content: a.content + b.content, reasoning: a.reasoning + b.reasoning, toolCalls };
}

function deltaOf(d: ReplyDelta, block: BlockText, logprobs: TokenLogprob[]): GenerateDelta | undefined {
  if (d.content === "" && d.reasoning === "" && d.toolCalls.length === 0 && logprobs.length === 0) return undefined;
  return create(GenerateDeltaSchema, {
    content: d.content,
    reasoning: d.reasoning,
    blockIndex: block.blockIndex,
    completionTokens: block.replyTokens,
    logprobs,
    toolCalls: d.toolCalls.map((c) =>
      create(ToolCallDeltaSchema, { index: c.index, id: c.id ?? "", name: c.name ?? "", arguments: c.arguments }),
    ),
  });
}

/** A constrained reply's end, and what the loop guard and the budgets did in it (metrics). */
function countConstrained(engine: ModelEngine, reason: string, grammar: GrammarReport): void {
  const metrics = engine.metrics;
  if (metrics === undefined) return;
  metrics.constrainedReplies.inc({ model: engine.name, finish_reason: reason });
  if (grammar.loopGuard > 0) metrics.loopGuardInterventions.inc({ model: engine.name, rule: "loop" }, grammar.loopGuard);
  if (grammar.budget > 0) metrics.loopGuardInterventions.inc({ model: engine.name, rule: "budget" }, grammar.budget);
}
