/**
 * Generate and CountTokens for a canvas model (contract v3, DiffusionGemma): the chat prompt
 * as for every model (chat-prompt.ts), rendered by the checkpoint's own template with Hugging
 * Face's variables (checkpoint-template.ts: tools, tool messages and the thinking switch where
 * config.json's capabilities say the template has them; images where the model has
 * vision.onnx, canvas-images.ts), or a raw prompt tokenized as it is (raw-prompt.ts), admitted
 * through the model's generation slots and wait queue (core/slots.ts, as for a mask model), decoded
 * by the canvas decoder, its canvases streamed as deltas (canvas-reply.ts: stop sequences,
 * logprobs) through the reply parser (the model's `special_tokens`: thinking into reasoning,
 * calls into tool_calls) and, when asked, each denoising step as a step event. JSON modes and
 * tool calls are decoded under a grammar from a frozen frontier (canvas-grammar.ts,
 * decoder/canvas/canvas-frontier.ts; docs/constrained-decoding.md "On a canvas").
 */
import { escapeChatVariables } from "../prompt/user-text.js";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { GenerateStepSchema } from "../../../gen/tessera/inference/v1/inference_pb.js";
import { StopMatcher } from "../decoder/reply-text.js";
import { checkRawPromptRequest, tokenizedPrompt } from "../prompt/raw-prompt.js";
import { tokenLogprobs } from "../reply/logprob-entries.js";
import { createRawReplyParser, createReplyParser, mergeDeltas, type ReplyParser } from "../reply/reply-parser.js";
import { checkpointTemplateVariables } from "../prompt/checkpoint-template.js";
import { CanvasReply, type CanvasReplyDelta } from "./canvas-reply.js";
import { CanvasImages, type CanvasImageLimits, DEFAULT_IMAGE_LIMITS, type ImagePrompt } from "./canvas-images.js";
import { buildChatPrompt, type ChatPrompt } from "../prompt/chat-prompt.js";
import { DEFAULT_GRAMMAR_OPTIONS } from "../grammar/model-grammars.js";
import type { ModelGrammarOptions } from "../grammar/request-grammar.js";
import type { CanvasConstraint } from "../decoder/canvas/canvas-frontier.js";
import { type CanvasGrammarPlan, canvasGrammarPlan, startCanvasGrammar } from "./canvas-grammar.js";
import { CanvasDecoder, type CanvasStepEvent, type PromptImages, seededDraws } from "../decoder/canvas/canvas-decoder.js";
import { type CanvasModel, type CanvasModelOptions, loadCanvasModel } from "../decoder/canvas/canvas-model.js";
import type { CountRequest, GenerationRequest, ReplyChunk, ReplyDelta, ReplyEvent } from "../core/model-engine.js";
import { checkStopSequences, logprobsAsked } from "../core/reply-options.js";
import { DEFAULT_MAX_SCORE_ROW_TOKENS, DEFAULT_MAX_SCORE_WORK_TOKENS } from "../core/score-limits.js";
import type { CanvasScoreLimits } from "./canvas-score.js";
import { InvalidRequest, PromptTooLong, ShuttingDown } from "../core/engine-errors.js";
import { type EngineMetrics, recordTransfer } from "../core/metrics.js";
import { SlotPool } from "../core/slots.js";
import { DecisionShare } from "../score/decision-share.js";
import type { Logger } from "../../../lib/logger.js";
import { resolveMaxTokens } from "../../../lib/text-limits.js";

export interface CanvasEngine {
  name: string;
  servingIds: string[];
  model: CanvasModel;
  decoder: CanvasDecoder;
  /** The image path, for a model with vision.onnx (canvas-images.ts). */
  images: CanvasImages | undefined;
  /** Generation slots and wait queue, as a mask model's (core/slots.ts): full means Overloaded (529). */
  slots: SlotPool;
  /** Decision slots and wait queue, and one lane per client, as a mask model's (decision-share.ts). */
  decisions: DecisionShare;
  /** The work cap and row cap of Score requests (canvas-score.ts). */
  scoreLimits: CanvasScoreLimits;
  /** The grammar settings of constrained replies (TESSERA_GRAMMAR_*), as a mask model's. */
  grammar: ModelGrammarOptions;
  /** Where each reply's `generation finished` line goes (the grammar's report with it), as for a mask model. */
  logger: Logger | undefined;
  /** Set by close(): new requests are refused, waiting ones ended. */
  readonly closed: boolean;
  /**
   * The engine metrics, where the canvas maps onto them: `committedPerForward` (policy "canvas")
   * is the tokens accepted per denoising step, `forwardsPerBlock` the steps per canvas.
   */
  metrics: EngineMetrics | undefined;
  close(): Promise<void>;
}

/** The unmasking-policy label of canvas decoding in the engine metrics. */
export const CANVAS_POLICY_LABEL = "canvas";

/** Whether a model directory is a canvas model (config.json's contract_version 3). */
export function isCanvasModelDir(dir: string): boolean {
  const file = path.join(dir, "config.json");
  if (!existsSync(file)) return false;
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { contract_version?: unknown }).contract_version === 3;
  } catch {
    return false;
  }
}

export async function loadCanvasEngine(
  dir: string,
  name: string,
  servingIds: string[],
  options: {
    slots: number;
    queue: number;
    imageLimits?: CanvasImageLimits;
    intraOpThreads?: number | undefined;
    metrics?: EngineMetrics | undefined;
    maxScoreWorkTokens?: number | undefined;
    maxScoreRowTokens?: number | undefined;
    grammar?: ModelGrammarOptions | undefined;
    /** The GPU provider and its fallback (decoder/canvas/canvas-model.ts). */
    providers?: Pick<CanvasModelOptions, "executionProviders" | "fallback" | "logger">;
  },
): Promise<CanvasEngine> {
  const slots = new SlotPool(name, options.slots, options.queue, (busy) => options.metrics?.slotsBusy.set({ model: name }, busy));
  const model = await loadCanvasModel(dir, {
    ...options.providers,
    ...(options.intraOpThreads !== undefined ? { intraOpThreads: options.intraOpThreads } : {}),
  });
  const { metrics } = options;
  // On the CPU provider nothing moves (as for mask models, engine/runtime.ts).
  const onDevice = model.executionProviders[0] !== "cpu";
  const decoder = new CanvasDecoder(model, undefined, metrics && onDevice ? (t) => recordTransfer(metrics, name, t) : undefined);
  const { vision } = model;
  const images =
    vision !== undefined && model.config.vision !== undefined
      ? new CanvasImages({ ...model, vision }, model.config.vision, options.imageLimits ?? DEFAULT_IMAGE_LIMITS)
      : undefined;
  const decisions = new DecisionShare(name, options.slots, options.queue);
  let closed = false;
  return {
    name,
    servingIds,
    model,
    decoder,
    images,
    slots,
    decisions,
    scoreLimits: {
      maxWorkTokens: options.maxScoreWorkTokens ?? DEFAULT_MAX_SCORE_WORK_TOKENS,
      maxRowTokens: options.maxScoreRowTokens ?? DEFAULT_MAX_SCORE_ROW_TOKENS,
    },
    grammar: options.grammar ?? DEFAULT_GRAMMAR_OPTIONS,
    logger: options.providers?.logger,
    get closed() {
      return closed;
    },
    metrics: options.metrics,
    close: async () => {
      closed = true;
      slots.rejectWaiting(new ShuttingDown(`model "${name}" is shutting down`));
      decisions.slots.rejectWaiting(new ShuttingDown(`model "${name}" is shutting down`));
      await images?.close();
      await model.close();
    },
  };
}

const invalid = (message: string) => new InvalidRequest(message);

function checkRequest(req: GenerationRequest): void {
  const options = req.options;
  checkStopSequences(options?.stop ?? []);
  if (req.rawPrompt !== undefined) checkRawPromptRequest(req, req.rawPrompt);
}

/**
 * The prompt's token ids, each image's run expanded (image tokens counted as prompt tokens), how
 * its reply is parsed, and the reply's grammar plan (its prompt suffix already in the ids).
 */
async function promptIds(
  engine: CanvasEngine,
  req: Pick<GenerationRequest, "model" | "messages" | "tools" | "options">,
): Promise<ImagePrompt & { parser: ReplyParser; plan: CanvasGrammarPlan | undefined }> {
  const collector = engine.images?.collector();
  const { text, parser, prompt } = renderCanvasChat(engine.model, engine.images !== undefined, req, collector?.imageText);
  const plan = canvasGrammarPlan(
    prompt,
    { messages: req.messages, tools: req.tools, options: req.options },
    engine.model.config.specialTokens,
  );
  const suffix = plan?.promptSuffix ?? "";
  if (suffix !== "") parser.push(suffix);
  const ids = engine.model.tokenizer.userText.encode(text + suffix);
  if (engine.images === undefined || collector === undefined) return { ids, urls: [], blocks: [], parser, plan };
  return { ...(await engine.images.expand(ids, collector.urls)), parser, plan };
}

/** Where an image part's token goes while the user's text is escaped (user-text.ts); a user who types it only miscounts their images (400). */
const IMAGE_PLACE = "\u{10FFFC}";

/**
 * A chat request's prompt text, rendered by the checkpoint's own template over escaped user text
 * (tokenize it with `tokenizer.userText.encode`), and the parser of its reply.
 */
export function renderCanvasChat(
  model: Pick<CanvasModel, "config" | "renderChat" | "tokenizer">,
  images: boolean,
  req: Pick<GenerationRequest, "model" | "messages" | "tools" | "options">,
  imageText?: (dataUrl: string) => string,
): { text: string; parser: ReplyParser; prompt: ChatPrompt } {
  const { config } = model;
  const capabilities = { images, tools: config.tools, thinking: config.thinking };
  let imageToken = "";
  const placed =
    imageText &&
    ((url: string) => {
      imageToken = imageText(url);
      return IMAGE_PLACE;
    });
  const built = buildChatPrompt(req.model, capabilities, { messages: req.messages, tools: req.tools, options: req.options }, placed);
  let text: string;
  try {
    text = model.renderChat(checkpointTemplateVariables(escapeChatVariables(built.variables, model.tokenizer.userText)));
    if (imageToken !== "") text = text.replaceAll(IMAGE_PLACE, imageToken);
  } catch (err) {
    throw invalid(`the chat template cannot render this conversation: ${err instanceof Error ? err.message : String(err)}`);
  }
  // Gemma 4's prompt never opens the thinking span (the model writes `<|channel>thought` itself),
  // so the parser starts outside it and enters it at the open tag. A forced call is read from its
  // open tag (the prompt's suffix, canvas-grammar.ts), the name included, as an auto call is.
  const { forcedTool: _, ...parserOptions } = built.parser;
  return { text, parser: createReplyParser({ ...parserOptions, thinking: false, tags: config.specialTokens }), prompt: built };
}

export async function canvasCountTokens(engine: CanvasEngine, req: CountRequest): Promise<{ tokens: number }> {
  if (req.rawPrompt !== undefined) {
    checkRawPromptRequest(req, req.rawPrompt);
    return { tokens: engine.model.tokenizer.encode(req.rawPrompt).length };
  }
  if (req.messages.length === 0) return { tokens: engine.model.tokenizer.encode(req.text).length };
  return { tokens: (await promptIds(engine, req)).ids.length };
}

export async function* canvasGenerate(engine: CanvasEngine, req: GenerationRequest, signal: AbortSignal): AsyncGenerator<ReplyEvent> {
  checkRequest(req);
  // A raw prompt (legacy completions) is tokenized as it is: no template, nothing added.
  const prompt: ImagePrompt & { parser: ReplyParser; plan: CanvasGrammarPlan | undefined } =
    req.rawPrompt !== undefined
      ? { ids: engine.model.tokenizer.encode(req.rawPrompt), urls: [], blocks: [], parser: createRawReplyParser(), plan: undefined }
      : await promptIds(engine, req);
  const { ids } = prompt;
  const { config } = engine.model;
  const context = config.maxPositions - config.canvasLength;
  if (ids.length >= context)
    throw new PromptTooLong(`prompt too long: ${ids.length} tokens, the context of model "${req.model}" is ${context} tokens`);
  const maxTokens = resolveMaxTokens(req.options?.maxTokens, {}, { promptTokens: ids.length, maxPositions: context });
  if (engine.closed) throw new ShuttingDown(`model "${engine.name}" is shutting down`);
  // A schema the grammar cannot enforce is refused before the request waits for a slot.
  const constraint =
    prompt.plan === undefined
      ? undefined
      : await startCanvasGrammar(engine.model, engine.grammar, prompt.plan, maxTokens, { metrics: engine.metrics, name: engine.name });
  try {
    await engine.slots.acquire(signal);
  } catch (err) {
    constraint?.grammar?.dispose();
    throw err;
  }
  const admitted = performance.now();
  // The slot is given back when the decoder lets the row go: at its end, or after the forward
  // it is in once the caller aborts, leaves the stream early or the engine closes. Tied to the
  // row, not to this generator's finally, which never runs while a consumer that went away
  // leaves the generator suspended at a yield (the mask scheduler frees its slots the same way).
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    engine.slots.release((performance.now() - admitted) / 1000);
  };
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  let decoding = false;
  try {
    // Images are model work, so they are decoded and embedded only once a slot is held.
    const images = prompt.urls.length > 0 ? await engine.images!.embed(prompt) : undefined;
    yield* decodeAndStream(engine, req, { ids, images, parser: prompt.parser, constraint }, maxTokens, stop.signal, (result) => {
      decoding = true;
      result.then(release, release);
    });
  } finally {
    signal.removeEventListener("abort", onAbort);
    stop.abort();
    if (!decoding) {
      constraint?.grammar?.dispose();
      release();
    }
  }
}

async function* decodeAndStream(
  engine: CanvasEngine,
  req: GenerationRequest,
  {
    ids,
    images,
    parser,
    constraint,
  }: { ids: number[]; images: PromptImages | undefined; parser: ReplyParser; constraint: CanvasConstraint | undefined },
  maxTokens: number,
  signal: AbortSignal,
  onStarted: (result: Promise<unknown>) => void,
): AsyncGenerator<ReplyEvent> {
  const { tokenizer } = engine.model;
  const options = req.options;
  const logprobs = logprobsAsked(options);
  const reply = new CanvasReply(tokenizer.decode, new StopMatcher(options?.stop ?? []));
  // Events as steps and canvases finish, through a small queue the decoder's callbacks fill.
  const pending: ReplyEvent[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const started = performance.now();
  const labels = { model: engine.name, policy: CANVAS_POLICY_LABEL };
  let canvasSteps = 0;
  const result = engine.decoder.generate({
    promptIds: ids,
    ...(images !== undefined ? { images } : {}),
    ...(logprobs !== undefined ? { logprobs } : {}),
    ...(constraint !== undefined ? { constraint } : {}),
    maxTokens,
    draws: seededDraws((Math.random() * 2 ** 32) >>> 0),
    signal,
    onStep: (e) => {
      canvasSteps++;
      engine.metrics?.committedPerForward.observe(labels, e.accepted);
      if (options?.includeDenoising !== true) return;
      pending.push({ type: "step", step: canvasStepEvent(e, tokenizer.decode) });
      wake?.();
    },
    // Under a grammar the committed tokens are final, so they stream as each step commits them.
    onCommitted: (piece) => {
      const d = reply.push(piece);
      const chunk = canvasChunk(parser.push(d.content), d, piece.canvasIndex, tokenizer);
      if (chunk !== undefined) pending.push({ type: "chunk", chunk });
      wake?.();
    },
    onCanvas: (canvas) => {
      engine.metrics?.forwardsPerBlock.observe(labels, canvasSteps);
      canvasSteps = 0;
      const d = reply.push(canvas);
      const chunk = canvasChunk(parser.push(d.content), d, canvas.canvasIndex, tokenizer);
      if (chunk !== undefined) pending.push({ type: "chunk", chunk });
      wake?.();
      return reply.endedByStop;
    },
  });
  onStarted(result);
  const settle = () => {
    done = true;
    wake?.();
  };
  result.then(settle, settle);
  const tokenizedPromptEntries = options?.includeTokenizedPrompt === true ? tokenizedPrompt(tokenizer, ids) : [];
  yield { type: "started", promptTokens: ids.length, tokenizedPrompt: tokenizedPromptEntries };
  for (;;) {
    while (pending.length > 0) yield pending.shift()!;
    if (done) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
      if (pending.length > 0 || done) resolve();
    });
    wake = undefined;
  }
  const r = await result;
  const last = reply.finish();
  const tailText = parser.push(last.content);
  const end = parser.finish();
  const tail = canvasChunk(mergeDeltas(tailText, end), last, r.canvases - 1, tokenizer);
  if (tail !== undefined) yield { type: "chunk", chunk: tail };
  const reason = r.finishReason === "stop" && end.sawToolCall ? "tool_calls" : r.finishReason;
  const completionTokens = last.completionTokens;
  if (constraint !== undefined && engine.metrics !== undefined) {
    const { metrics } = engine;
    metrics.constrainedReplies.inc({ model: engine.name, finish_reason: reason });
    if (r.grammar !== undefined) {
      metrics.jumpForwardTokens.inc({ model: engine.name }, r.grammar.forced);
      if (r.grammar.loopGuard > 0) metrics.loopGuardInterventions.inc({ model: engine.name, rule: "loop" }, r.grammar.loopGuard);
      if (r.grammar.budget > 0) metrics.loopGuardInterventions.inc({ model: engine.name, rule: "budget" }, r.grammar.budget);
    }
  }
  if (r.grammar?.deadEnd === true) {
    engine.logger?.warn({ requestId: req.requestId, model: req.model }, "grammar dead end: the reply ends with what was valid");
  }
  engine.logger?.info(
    {
      requestId: req.requestId,
      model: req.model,
      decoding: "canvas",
      promptTokens: ids.length,
      completionTokens,
      finishReason: reason,
      // Denoiser steps; the encoder passes are not counted.
      forwardPasses: r.steps,
      ms: Math.round(performance.now() - started),
      ...(r.grammar !== undefined ? { grammar: { ...r.grammar, ms: Math.round(r.grammar.ms * 10) / 10 } } : {}),
    },
    "generation finished",
  );
  engine.metrics?.generatedTokens.inc({ model: engine.name }, completionTokens);
  engine.metrics?.requestDuration.observe({ model: engine.name }, (performance.now() - started) / 1000);
  yield { type: "finished", reason, promptTokens: ids.length, completionTokens, forwardPasses: r.steps };
}

/** A canvas's piece of the reply (the parser's content, reasoning and tool calls of its text; its logprobs), or undefined when it adds nothing. */
function canvasChunk(
  parsed: ReplyDelta,
  d: CanvasReplyDelta,
  canvasIndex: number,
  tokenizer: CanvasEngine["model"]["tokenizer"],
): ReplyChunk | undefined {
  if (parsed.content === "" && parsed.reasoning === "" && parsed.toolCalls.length === 0 && d.logprobs.length === 0) return undefined;
  const logprobs = tokenLogprobs(tokenizer, d.logprobs);
  return { ...parsed, blockIndex: canvasIndex, completionTokens: d.completionTokens, logprobs };
}

/** A canvas step as the Generate stream's `step` event: every position's draft token and whether it was accepted. */
function canvasStepEvent(e: CanvasStepEvent, decode: (ids: readonly number[]) => string) {
  return create(GenerateStepSchema, {
    blockIndex: e.canvasIndex,
    step: e.canvasStep,
    blockSize: e.draft.length,
    replyStart: 0,
    masked: e.draft.length - e.accepted,
    canvas: e.draft.map((tokenId, i) => ({ tokenId, text: decode([tokenId]), accepted: e.acceptedMask[i] === true })),
    canvasFinal: e.last,
  });
}
