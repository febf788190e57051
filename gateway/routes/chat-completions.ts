import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { GenerateResponse, InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ModelKind, type RegistryService, type ResolveModelResponse } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { InferenceFor } from "../../lib/inference-router.js";
import { HttpError, toHttpError } from "../errors.js";
import {
  DEFAULT_MAX_TOKENS,
  collectCompletion,
  createCompletionMeta,
  parseChatRequest,
  streamCompletion,
  type StreamErrorBody,
} from "../mappers/chat.js";
import type { Route } from "../route.js";
import { createSseWriter } from "../sse.js";

export interface ChatRouteDeps {
  registry: Pick<Client<typeof RegistryService>, "resolveModel">;
  inferenceFor: InferenceFor;
  /** A stream whose client reads nothing for this long is dropped and its generation cancelled. Default 30 s. */
  streamStallTimeoutMs?: number;
}

/**
 * Workers know a model by its serving id; the client asked for a model id. Errors that name
 * the serving id are told in terms of the id the client knows (details kept).
 */
function inClientTerms(err: unknown, servingId: string, model: string): unknown {
  if (!(err instanceof ConnectError) || servingId === model || !err.rawMessage.includes(`"${servingId}"`)) return err;
  const renamed = new ConnectError(err.rawMessage.replaceAll(`"${servingId}"`, `"${model}"`), err.code, err.metadata, undefined, err.cause);
  renamed.details = err.details;
  return renamed;
}

/** The generation events with `started.model` set to the id the client asked for, errors in its terms. */
async function* shownAs(events: AsyncIterable<GenerateResponse>, servingId: string, model: string, delivered: { text: string }) {
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

function streamErrorBody(err: unknown): StreamErrorBody {
  const http = toHttpError(err);
  return { message: http.message, type: http.type, code: http.options.code ?? null };
}

/**
 * POST /v1/chat/completions. Order: validate the body (400 naming `param`), resolve the
 * model (404 `model_not_found`), count the prompt's tokens, admit the key reserving prompt +
 * max_tokens of its text quota (429), generate (JSON or SSE), settle the exact usage; a
 * stream the client leaves is charged what was delivered.
 */
export function chatCompletionsRoute({ registry, inferenceFor, streamStallTimeoutMs }: ChatRouteDeps): Route {
  return {
    method: "POST",
    path: "/v1/chat/completions",
    errorStyle: "openai",
    // Admitted by the handler, once it knows the prompt's size: its hold is prompt + max_tokens.
    charge: { kind: UsageKind.TEXT, hold: "handler" },
    body: "json",
    async handle(ctx) {
      const parsed = parseChatRequest(ctx.body, { requestId: ctx.requestId });
      if (!parsed.ok) {
        const { message, param, code } = parsed.error;
        throw new HttpError(400, "invalid_request_error", message, { code: code ?? "invalid_request", param });
      }
      const { request, stream, includeUsage } = parsed;
      const asked = request.model;
      ctx.log.model = asked;

      let resolved: ResolveModelResponse;
      try {
        resolved = await registry.resolveModel({ model: asked, kind: ModelKind.TEXT }, { signal: ctx.signal });
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
      const { servingId, id: shownModel } = resolved.model!;
      const inference: Client<typeof InferenceService> = inferenceFor(servingId);
      request.model = servingId;

      const counted = await inference
        .countTokens(
          { model: servingId, messages: request.messages, tools: request.tools, options: request.options },
          { signal: ctx.signal },
        )
        .catch((err: unknown) => {
          throw inClientTerms(err, servingId, shownModel);
        });
      const maxTokens = request.options?.maxTokens || DEFAULT_MAX_TOKENS;
      await ctx.admit(UsageKind.TEXT, counted.tokens + maxTokens);

      const meta = createCompletionMeta({
        model: shownModel,
        reasoning: request.options?.enableThinking ?? false,
        logprobs: request.options?.logprobs ?? false,
      });
      const delivered = { text: "" };
      if (!stream) {
        const completion = await collectCompletion(
          shownAs(inference.generate(request, { signal: ctx.signal }), servingId, shownModel, delivered),
          meta,
        );
        await ctx.settle(UsageKind.TEXT, {
          promptTokens: completion.usage.prompt_tokens,
          completionTokens: completion.usage.completion_tokens,
        });
        return { body: completion };
      }

      const sse = createSseWriter(ctx.res, streamStallTimeoutMs === undefined ? {} : { stallTimeoutMs: streamStallTimeoutMs });
      const signal = AbortSignal.any([ctx.signal, sse.signal]);
      const outcome = await streamCompletion(
        sse,
        shownAs(inference.generate(request, { signal }), servingId, shownModel, delivered),
        meta,
        streamErrorBody,
        { includeUsage },
      );
      let completionTokens = outcome.completionTokens;
      if (completionTokens === undefined) {
        // The stream ended early: charge the tokens of the text that reached the client.
        completionTokens =
          delivered.text === ""
            ? 0
            : (await inference.countTokens({ model: servingId, text: delivered.text }).catch(() => ({ tokens: 0 }))).tokens;
      }
      await ctx.settle(UsageKind.TEXT, { promptTokens: outcome.promptTokens || counted.tokens, completionTokens });
      if (outcome.outcome === "failed") ctx.log["streamError"] = toHttpError(outcome.error).message;
      return undefined;
    },
  };
}
