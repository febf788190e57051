import type { Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { InferenceFor } from "../../lib/inference-router.js";
import { HttpError, toHttpError } from "../errors.js";
import { collectCompletion, createCompletionMeta, type ParsedChatRequest, streamCompletion } from "../mappers/chat.js";
import type { Route } from "../route.js";
import { createSseWriter } from "../sse.js";
import { admitChatGeneration, resolveTextModel, shownAs, streamErrorBody, tokensOfText } from "./text-generation.js";

export interface ChatRouteDeps {
  registry: Pick<Client<typeof RegistryService>, "resolveModel">;
  inferenceFor: InferenceFor;
  /** A stream whose client reads nothing for this long is dropped and its generation cancelled. Default 30 s. */
  streamStallTimeoutMs?: number;
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
    // Validated where the body is parsed: off the event loop for a large one.
    prepareBody: "chat",
    async handle(ctx) {
      const parsed = ctx.body as ParsedChatRequest;
      if (!parsed.ok) {
        const { message, param, code } = parsed.error;
        throw new HttpError(400, "invalid_request_error", message, { code: code ?? "invalid_request", param });
      }
      const { request, stream, includeUsage } = parsed;
      request.requestId = ctx.requestId;
      const asked = request.model;
      ctx.log.model = asked;

      const { servingId, shownModel } = await resolveTextModel(registry, asked, ctx.signal);
      const inference: Client<typeof InferenceService> = inferenceFor(servingId);
      request.model = servingId;

      const promptTokens = await admitChatGeneration(ctx, inference, request, { servingId, shownModel });

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
      // A stream that ended early is charged the tokens of the text that reached the client.
      const completionTokens = outcome.completionTokens ?? (await tokensOfText(inference, servingId, delivered.text));
      await ctx.settle(UsageKind.TEXT, { promptTokens: outcome.promptTokens || promptTokens, completionTokens });
      if (outcome.outcome === "failed") ctx.log["streamError"] = toHttpError(outcome.error).message;
      return undefined;
    },
  };
}
