import { HttpError } from "../errors.js";
import { RATE_ONLY } from "../gate.js";
import { collectResponse, createResponseMeta } from "../mappers/responses-response.js";
import { streamResponse } from "../mappers/responses-stream.js";
import type { Route } from "../route.js";
import { streamErrorBody, type TextRouteDeps, textRoute } from "./text-generation.js";

/**
 * POST /v1/responses, the stateless part of OpenAI's Responses API, on the chat pipeline
 * (docs/responses.md), with the same order, limits, quota and errors as chat completions
 * (textRoute); what needs stored state is refused when the body is validated.
 */
export function responsesRoute(deps: TextRouteDeps) {
  return textRoute(deps, {
    path: "/v1/responses",
    prepare: "responses",
    answer({ echo }, { shownModel, tokensOf }) {
      const meta = createResponseMeta({ model: shownModel, echo });
      return {
        collect: (events) => collectResponse(events, meta, tokensOf),
        usageOf: ({ usage }) => ({ promptTokens: usage!.input_tokens, completionTokens: usage!.output_tokens }),
        stream: (sse, events) => streamResponse(sse, events, meta, streamErrorBody, tokensOf),
      };
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
