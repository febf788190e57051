import { collectCompletion, createCompletionMeta, type ParsedChatRequest, streamCompletion } from "../mappers/chat.js";
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
 * POST /v1/chat/completions. Order: validate the body (400 naming `param`), resolve the
 * model (404 `model_not_found`), count the prompt's tokens, admit the key reserving prompt +
 * max_tokens of its text quota (429), generate (JSON or SSE), settle the exact usage; a
 * stream the client leaves is charged what was delivered.
 */
export function chatCompletionsRoute(deps: TextRouteDeps): Route {
  return textGenerationRoute("/v1/chat/completions", {
    // Validated where the body is parsed: off the event loop for a large one.
    prepareBody: "chat",
    async handle(ctx) {
      const { request, stream, includeUsage } = acceptedRequest(ctx.body as ParsedChatRequest);
      const generation = await startTextGeneration(ctx, deps, request);
      const promptTokens = await admitChatGeneration(ctx, generation);
      const meta = createCompletionMeta({
        model: generation.shownModel,
        reasoning: request.options?.enableThinking ?? false,
        logprobs: request.options?.logprobs ?? false,
      });
      return answerGeneration(
        ctx,
        generation,
        { stream, promptTokens, streamStallTimeoutMs: deps.streamStallTimeoutMs },
        {
          collect: (events) => collectCompletion(events, meta),
          usageOf: ({ usage }) => ({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }),
          stream: (sse, events) => streamCompletion(sse, events, meta, streamErrorBody, { includeUsage }),
        },
      );
    },
  });
}
