import { HttpError } from "../errors.js";
import { RATE_ONLY } from "../gate.js";
import type { ParsedResponsesRequest } from "../mappers/responses-request.js";
import { collectResponse, createResponseMeta } from "../mappers/responses-response.js";
import { streamResponse } from "../mappers/responses-stream.js";
import type { Route } from "../route.js";
import {
  acceptedRequest,
  admitChatGeneration,
  answerGeneration,
  startTextGeneration,
  streamErrorBody,
  textGenerationRoute,
  type TextRouteDeps,
} from "./text-generation.js";

/**
 * POST /v1/responses, the stateless part of OpenAI's Responses API, on the chat pipeline
 * (docs/responses.md). The same order, limits, quota and errors as chat completions:
 * validate the body (400 naming `param`; what needs stored state is refused here), resolve
 * the model (404 `model_not_found`), count the prompt's tokens, admit the key reserving
 * prompt + max_output_tokens of its text quota (429), generate (JSON or SSE), settle the
 * exact usage; a stream the client leaves is charged what was delivered.
 */
export function responsesRoute(deps: TextRouteDeps): Route {
  return textGenerationRoute("/v1/responses", {
    // Validated where the body is parsed: off the event loop for a large one.
    prepareBody: "responses",
    async handle(ctx) {
      const { request, stream, echo } = acceptedRequest(ctx.body as ParsedResponsesRequest);
      const generation = await startTextGeneration(ctx, deps, request);
      const promptTokens = await admitChatGeneration(ctx, generation);
      const { tokensOf } = generation;
      const meta = createResponseMeta({ model: generation.shownModel, echo });
      return answerGeneration(
        ctx,
        generation,
        { stream, promptTokens, streamStallTimeoutMs: deps.streamStallTimeoutMs },
        {
          collect: (events) => collectResponse(events, meta, tokensOf),
          usageOf: ({ usage }) => ({ promptTokens: usage!.input_tokens, completionTokens: usage!.output_tokens }),
          stream: (sse, events) => streamResponse(sse, events, meta, streamErrorBody, tokensOf),
        },
      );
    },
  });
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
