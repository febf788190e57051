import type { Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { InferenceFor } from "../../lib/inference-router.js";
import { HttpError, toHttpError } from "../errors.js";
import { RATE_ONLY } from "../gate.js";
import type { ParsedResponsesRequest } from "../mappers/responses-request.js";
import { collectResponse, createResponseMeta } from "../mappers/responses-response.js";
import { streamResponse } from "../mappers/responses-stream.js";
import type { Route } from "../route.js";
import { createSseWriter } from "../sse.js";
import { admitChatGeneration, resolveTextModel, shownAs, streamErrorBody, tokensOfText } from "./text-generation.js";

export interface ResponsesRouteDeps {
  registry: Pick<Client<typeof RegistryService>, "resolveModel">;
  inferenceFor: InferenceFor;
  /** A stream whose client reads nothing for this long is dropped and its generation cancelled. Default 30 s. */
  streamStallTimeoutMs?: number;
}

/**
 * POST /v1/responses, the stateless part of OpenAI's Responses API, on the chat pipeline
 * (docs/responses.md). The same order, limits, quota and errors as chat completions:
 * validate the body (400 naming `param`; what needs stored state is refused here), resolve
 * the model (404 `model_not_found`), count the prompt's tokens, admit the key reserving
 * prompt + max_output_tokens of its text quota (429), generate (JSON or SSE), settle the
 * exact usage; a stream the client leaves is charged what was delivered.
 */
export function responsesRoute({ registry, inferenceFor, streamStallTimeoutMs }: ResponsesRouteDeps): Route {
  return {
    method: "POST",
    path: "/v1/responses",
    errorStyle: "openai",
    charge: { kind: UsageKind.TEXT, hold: "handler" },
    body: "json",
    // Validated where the body is parsed: off the event loop for a large one.
    prepareBody: "responses",
    async handle(ctx) {
      const parsed = ctx.body as ParsedResponsesRequest;
      if (!parsed.ok) {
        const { message, param, code } = parsed.error;
        throw new HttpError(400, "invalid_request_error", message, { code, param });
      }
      const { request, stream, echo } = parsed;
      request.requestId = ctx.requestId;
      const asked = request.model;
      ctx.log.model = asked;

      const { servingId, shownModel } = await resolveTextModel(registry, asked, ctx.signal);
      const inference: Client<typeof InferenceService> = inferenceFor(servingId);
      request.model = servingId;
      const tokensOf = (text: string) => tokensOfText(inference, servingId, text);
      const promptTokens = await admitChatGeneration(ctx, inference, request, { servingId, shownModel });

      const meta = createResponseMeta({ model: shownModel, echo });
      const delivered = { text: "" };
      if (!stream) {
        const response = await collectResponse(
          shownAs(inference.generate(request, { signal: ctx.signal }), servingId, shownModel, delivered),
          meta,
          tokensOf,
        );
        await ctx.settle(UsageKind.TEXT, {
          promptTokens: response.usage!.input_tokens,
          completionTokens: response.usage!.output_tokens,
        });
        return { body: response };
      }

      const sse = createSseWriter(ctx.res, streamStallTimeoutMs === undefined ? {} : { stallTimeoutMs: streamStallTimeoutMs });
      const signal = AbortSignal.any([ctx.signal, sse.signal]);
      const outcome = await streamResponse(
        sse,
        shownAs(inference.generate(request, { signal }), servingId, shownModel, delivered),
        meta,
        streamErrorBody,
        tokensOf,
      );
      // A stream that ended early is charged the tokens of the text that reached the client.
      const completionTokens = outcome.completionTokens ?? (await tokensOf(delivered.text));
      await ctx.settle(UsageKind.TEXT, { promptTokens: outcome.promptTokens || promptTokens, completionTokens });
      if (outcome.outcome === "failed") ctx.log["streamError"] = toHttpError(outcome.error).message;
      return undefined;
    },
  };
}

const RESPONSE_PATH_PREFIX = "/v1/responses/";

/**
 * GET /v1/responses/{id} (`client.responses.retrieve`): nothing is stored, so every id is a
 * 404 in OpenAI's shape that says why, rather than the unknown-path answer.
 */
export function responseRetrieveRoute(): Route {
  return {
    method: "GET",
    path: `${RESPONSE_PATH_PREFIX}{id}`,
    errorStyle: "openai",
    charge: RATE_ONLY,
    body: "none",
    handle(ctx) {
      const id = (ctx.req.url ?? "").slice(RESPONSE_PATH_PREFIX.length).split("?")[0]!.slice(0, 200);
      throw new HttpError(
        404,
        "invalid_request_error",
        `Response with id '${id}' not found: this server keeps no responses (it is stateless).`,
        {
          code: "not_found",
        },
      );
    },
  };
}
