import { checkpointed } from "../checkpoints.js";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type {
  CountTokensRequestSchema,
  GenerateRequest,
  GenerateResponse,
  InferenceService,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import { ModelKind, type RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { InferenceFor } from "../../lib/inference-router.js";
import { HttpError, toHttpError } from "../errors.js";
import type { SettleUsage } from "../gate.js";
import { admitGenerationHold } from "../admission.js";
import type { StreamErrorBody, StreamOutcome } from "../mappers/generation-stream.js";
import type { AcceptedBodies, PreparedBody, TextBodyPreparer } from "../body-prepare.js";
import type { JsonReply, RequestContext, Route } from "../route.js";
import type { RequestError } from "../schemas/request-errors.js";
import { createSseWriter, type SseWriter } from "../sse.js";

/**
 * What every route that generates text shares (chat completions, completions, Responses):
 * resolving the model the client named to a serving id, admitting a chat-templated request for
 * its size, telling the engine's errors and events in the client's terms, and counting what a
 * stream that ended early delivered; and running the generation, as one JSON answer or as SSE,
 * with the route's own collector or streamer.
 */

export interface TextRouteDeps {
  registry: Pick<Client<typeof RegistryService>, "resolveModel">;
  inferenceFor: InferenceFor;
  /** A stream whose client reads nothing for this long is dropped and its generation cancelled. Default 30 s. */
  streamStallTimeoutMs?: number;
}

/** What a text route declares; the rest (order, errors, charge, JSON or SSE) is textRoute's. */
export interface TextRouteSpec<P extends TextBodyPreparer, Body> {
  path: string;
  /** Validates and maps the body (body-prepare.ts), off the event loop for a large one. */
  prepare: P;
  /**
   * Counts the prompt as Generate will take it and admits the key for prompt + max_tokens;
   * returns the prompt's tokens. Default: the chat-templated prompt (admitChatGeneration).
   */
  admit?(ctx: RequestContext, generation: TextGeneration, accepted: AcceptedBodies[P]): Promise<number>;
  /** How the generation is answered: collected into a JSON body (and what it is charged), or streamed. */
  answer(accepted: AcceptedBodies[P], generation: TextGeneration): GenerationAnswer<Body>;
}

/**
 * A POST route that generates text. Order: validate the body (400 naming `param`), resolve the
 * model (404 `model_not_found`), count the prompt's tokens, admit the key reserving prompt +
 * max_tokens of its text quota (429), generate (JSON or SSE), settle the exact usage; a stream
 * the client leaves is charged what was delivered.
 */
export function textRoute<P extends TextBodyPreparer, Body>(deps: TextRouteDeps, spec: TextRouteSpec<P, Body>): Route<PreparedBody<P>> {
  const admit = spec.admit ?? admitChatGeneration;
  return {
    method: "POST",
    path: spec.path,
    errorStyle: "openai",
    charge: { kind: UsageKind.TEXT, hold: "handler" },
    body: "json",
    prepareBody: spec.prepare,
    async handle(ctx) {
      const accepted = acceptedRequest(ctx.body);
      const generation = await startTextGeneration(ctx, deps, accepted.request);
      const promptTokens = await admit(ctx, generation, accepted);
      const how = { stream: accepted.stream, promptTokens, streamStallTimeoutMs: deps.streamStallTimeoutMs };
      return answerGeneration(ctx, generation, how, spec.answer(accepted, generation));
    },
  };
}

/** The request of a body that parsed, or the 400 that names the field at fault. */
export function acceptedRequest<Accepted extends { ok: true }>(parsed: Accepted | { ok: false; error: RequestError }): Accepted {
  if (!parsed.ok) {
    const { message, param, code } = parsed.error;
    throw new HttpError(400, "invalid_request_error", message, { code, param });
  }
  return parsed;
}

export interface ResolvedTextModel {
  /** The id workers know the model by. */
  servingId: string;
  /** The id the client asked for, as the answers show it. */
  shownModel: string;
}

/** The text model `asked` names: 404 `model_not_found` for an unknown one, 400 for an id the registry refuses. */
async function resolveTextModel(
  registry: Pick<Client<typeof RegistryService>, "resolveModel">,
  asked: string,
  signal: AbortSignal,
): Promise<ResolvedTextModel> {
  try {
    const resolved = await registry.resolveModel({ model: asked, kind: ModelKind.TEXT }, { signal });
    return { servingId: resolved.model!.servingId, shownModel: resolved.model!.id };
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.NotFound) {
      throw new HttpError(404, "invalid_request_error", `The model \`${asked}\` does not exist or you do not have access to it.`, {
        code: "model_not_found",
        param: "model",
      });
    }
    if (err instanceof ConnectError && err.code === Code.InvalidArgument) {
      throw new HttpError(400, "invalid_request_error", err.rawMessage, { code: "invalid_value", param: "model" });
    }
    throw err;
  }
}

/**
 * Workers know a model by its serving id; the client asked for a model id. Errors that name
 * the serving id are told in terms of the id the client knows (details kept).
 */
export function inClientTerms(err: unknown, servingId: string, model: string): unknown {
  if (!(err instanceof ConnectError) || servingId === model || !err.rawMessage.includes(`"${servingId}"`)) return err;
  const renamed = new ConnectError(err.rawMessage.replaceAll(`"${servingId}"`, `"${model}"`), err.code, err.metadata, undefined, err.cause);
  renamed.details = err.details;
  return renamed;
}

/** The generation events with `started.model` set to the id the client asked for, errors in its terms. */
async function* shownAs(events: AsyncIterable<GenerateResponse>, servingId: string, model: string) {
  try {
    for await (const event of events) {
      if (event.event.case === "started") event.event.value.model = model;
      yield event;
    }
  } catch (err) {
    throw inClientTerms(err, servingId, model);
  }
}

/** The OpenAI error object of a stream's error event. */
export function streamErrorBody(err: unknown): StreamErrorBody {
  const http = toHttpError(err);
  return { message: http.message, type: http.type, code: http.options.code ?? null };
}

/**
 * Counts a request's prompt as Generate will take it (`prompt`: the chat messages, tools and
 * options, or a raw prompt) and admits the key reserving prompt + `maxTokens` of its text
 * quota (429 when that does not fit). Returns the prompt's tokens.
 */
export async function admitGeneration(
  ctx: Pick<RequestContext, "admit" | "signal">,
  { inference, servingId, shownModel }: Pick<TextGeneration, "inference" | "servingId" | "shownModel">,
  prompt: Omit<MessageInitShape<typeof CountTokensRequestSchema>, "model" | "$typeName">,
  maxTokens: number | undefined,
): Promise<number> {
  const admit = (kind: UsageKind, tokens: number) => ctx.admit(kind, tokens);
  return admitGenerationHold(admit, inference, { ...prompt, model: servingId }, maxTokens, ctx.signal).catch((err: unknown) => {
    throw inClientTerms(err, servingId, shownModel);
  });
}

/** admitGeneration for a chat-templated request (max_tokens unset: the default). */
export function admitChatGeneration(
  ctx: Pick<RequestContext, "admit" | "signal">,
  generation: Omit<TextGeneration, "tokensOf">,
): Promise<number> {
  const { request } = generation;
  const prompt = {
    messages: request.messages,
    tools: request.tools,
    ...(request.options !== undefined ? { options: request.options } : {}),
  };
  return admitGeneration(ctx, generation, prompt, request.options?.maxTokens);
}

/** Tokens of a text (0 for none, or when counting fails). */
async function tokensOfText(
  inference: Pick<Client<typeof InferenceService>, "countTokens">,
  servingId: string,
  text: string,
): Promise<number> {
  if (text === "") return 0;
  return (await inference.countTokens({ model: servingId, text }).catch(() => ({ tokens: 0 }))).tokens;
}

/** A request bound for the worker that serves its model. */
export interface TextGeneration extends ResolvedTextModel {
  request: GenerateRequest;
  inference: Client<typeof InferenceService>;
  /** Tokens of a text in this model (0 for none, or when counting fails). */
  tokensOf(text: string): Promise<number>;
}

/**
 * Resolves the model the request names (404 `model_not_found`) and points the request at its
 * serving id, tagged with the HTTP request's id; the model asked for goes on the log line.
 */
export async function startTextGeneration(
  ctx: Pick<RequestContext, "requestId" | "log" | "signal">,
  { registry, inferenceFor }: Pick<TextRouteDeps, "registry" | "inferenceFor">,
  request: GenerateRequest,
): Promise<TextGeneration> {
  request.requestId = ctx.requestId;
  ctx.log.model = request.model;
  const model = await resolveTextModel(registry, request.model, ctx.signal);
  const inference = inferenceFor(model.servingId);
  request.model = model.servingId;
  return { ...model, request, inference, tokensOf: (text) => tokensOfText(inference, model.servingId, text) };
}

/** How a route answers one generation: collected into a JSON body, or streamed as SSE. */
export interface GenerationAnswer<Body> {
  collect(events: AsyncIterable<GenerateResponse>): Promise<Body>;
  /** What a collected body is charged. */
  usageOf(body: Body): SettleUsage;
  /** Streams the generation; `events` follows the writer's signal, so a client that leaves cancels it. */
  stream(sse: SseWriter, events: AsyncIterable<GenerateResponse>): Promise<Omit<StreamOutcome, "deltasSent">>;
}

/**
 * Runs an admitted generation as JSON or SSE and settles its exact usage. A stream that ended
 * early is charged its prompt (`promptTokens`, as counted at admission, when the stream never
 * said) and the completion tokens the engine reported with the last delta passed on (its
 * `completion_tokens`, as a Connect stream and a checkpoint are charged; nothing re-tokenized).
 */
export async function answerGeneration<Body>(
  ctx: RequestContext,
  generation: TextGeneration,
  how: { stream: boolean; promptTokens: number; streamStallTimeoutMs: number | undefined },
  answer: GenerationAnswer<Body>,
): Promise<JsonReply | undefined> {
  const { request, inference, servingId, shownModel } = generation;
  const events = (signal: AbortSignal) => shownAs(inference.generate(request, { signal }), servingId, shownModel);
  if (!how.stream) {
    const body = await answer.collect(events(ctx.signal));
    await ctx.settle(UsageKind.TEXT, answer.usageOf(body));
    return { body };
  }

  const sse = createSseWriter(ctx.res, how.streamStallTimeoutMs === undefined ? {} : { stallTimeoutMs: how.streamStallTimeoutMs });
  // Counted and checkpointed as it goes, so that a kill -9 still charges what was delivered (checkpoints.ts).
  const delivered: { usage: SettleUsage | undefined } = { usage: undefined };
  const outcome = await answer.stream(sse, checkpointed(events(AbortSignal.any([ctx.signal, sse.signal])), ctx, delivered));
  const completionTokens = outcome.completionTokens ?? delivered.usage?.completionTokens ?? 0;
  await ctx.settle(UsageKind.TEXT, { promptTokens: outcome.promptTokens || how.promptTokens, completionTokens });
  if (outcome.outcome === "failed") ctx.log["streamError"] = toHttpError(outcome.error).message;
  return undefined;
}
