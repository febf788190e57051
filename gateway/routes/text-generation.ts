import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { GenerateRequest, GenerateResponse, InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ModelKind, type RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { HttpError, toHttpError } from "../errors.js";
import { DEFAULT_MAX_TOKENS } from "../mappers/chat.js";
import type { StreamErrorBody } from "../mappers/generation-stream.js";
import type { RequestContext } from "../route.js";

/**
 * What every route that generates text shares (chat completions, completions, Responses):
 * resolving the model the client named to a serving id, admitting a chat-templated request for
 * its size, telling the engine's errors and events in the client's terms, and counting what a
 * stream that ended early delivered.
 */

export interface ResolvedTextModel {
  /** The id workers know the model by. */
  servingId: string;
  /** The id the client asked for, as the answers show it. */
  shownModel: string;
}

/** The text model `asked` names: 404 `model_not_found` for an unknown one, 400 for an id the registry refuses. */
export async function resolveTextModel(
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

/**
 * The generation events with `started.model` set to the id the client asked for, errors in its
 * terms; `delivered.text` collects the text of the deltas passed on (what a stream the client
 * leaves is charged).
 */
export async function* shownAs(events: AsyncIterable<GenerateResponse>, servingId: string, model: string, delivered: { text: string }) {
  try {
    for await (const event of events) {
      if (event.event.case === "started") event.event.value.model = model;
      if (event.event.case === "delta") {
        const { content, reasoning, toolCalls } = event.event.value;
        delivered.text += reasoning + content + toolCalls.map((c) => c.name + c.arguments).join("");
      }
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
 * Counts a chat-templated request's prompt and admits the key reserving prompt + max_tokens
 * of its text quota (429 when that does not fit). Returns the prompt's tokens.
 */
export async function admitChatGeneration(
  ctx: Pick<RequestContext, "admit" | "signal">,
  inference: Pick<Client<typeof InferenceService>, "countTokens">,
  request: GenerateRequest,
  model: ResolvedTextModel,
): Promise<number> {
  const counted = await inference
    .countTokens(
      { model: model.servingId, messages: request.messages, tools: request.tools, options: request.options },
      { signal: ctx.signal },
    )
    .catch((err: unknown) => {
      throw inClientTerms(err, model.servingId, model.shownModel);
    });
  await ctx.admit(UsageKind.TEXT, counted.tokens + (request.options?.maxTokens || DEFAULT_MAX_TOKENS));
  return counted.tokens;
}

/** Tokens of a text (0 for none, or when counting fails): what a stream that ended early delivered. */
export async function tokensOfText(
  inference: Pick<Client<typeof InferenceService>, "countTokens">,
  servingId: string,
  text: string,
): Promise<number> {
  if (text === "") return 0;
  return (await inference.countTokens({ model: servingId, text }).catch(() => ({ tokens: 0 }))).tokens;
}
