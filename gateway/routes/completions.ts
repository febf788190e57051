import { collectTextCompletion, createTextChunker, createTextCompletionMeta, type ParsedCompletionRequest } from "../mappers/completion.js";
import { streamGeneration } from "../mappers/generation-stream.js";
import type { Route } from "../route.js";
import {
  acceptedRequest,
  admitGeneration,
  answerGeneration,
  startTextGeneration,
  streamErrorBody,
  textGenerationRoute,
  type TextRouteDeps,
} from "./text-generation.js";

/**
 * POST /v1/completions, OpenAI's legacy completions: the prompt continued as it is (no chat
 * template, GenerateRequest.raw_prompt). The same order, gate charge and errors as chat
 * completions: validate (400 naming `param`), resolve the model (404), count the prompt's
 * tokens, admit reserving prompt + max_tokens of the text quota (429), generate (JSON or SSE),
 * settle the exact usage; a stream the client leaves is charged what was delivered.
 */
export function completionsRoute(deps: TextRouteDeps): Route {
  return textGenerationRoute("/v1/completions", {
    // Validated where the body is parsed: off the event loop for a large one.
    prepareBody: "completion",
    async handle(ctx) {
      const { request, prompt, stream, includeUsage, echo, logprobs } = acceptedRequest(ctx.body as ParsedCompletionRequest);
      const generation = await startTextGeneration(ctx, deps, request);
      const { shownModel } = generation;

      // Counted as Generate will take it: a prompt that cannot fit the context is refused before it is tokenized.
      const promptTokens = await admitGeneration(ctx, generation, { rawPrompt: prompt }, request.options?.maxTokens ?? 0);

      const meta = createTextCompletionMeta({ model: shownModel, prompt, echo, logprobs });
      return answerGeneration(
        ctx,
        generation,
        { stream, promptTokens, streamStallTimeoutMs: deps.streamStallTimeoutMs },
        {
          collect: (events) => collectTextCompletion(events, meta),
          usageOf: ({ usage }) => ({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }),
          stream: (sse, events) => streamGeneration(sse, events, createTextChunker(meta, { includeUsage }), streamErrorBody),
        },
      );
    },
  });
}
