import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { collectTextCompletion, createTextChunker, createTextCompletionMeta, parseCompletionRequest } from "../mappers/completion.js";
import { streamGeneration } from "../mappers/generation-stream.js";
import type { Route } from "../route.js";
import {
  acceptedRequest,
  answerGeneration,
  inClientTerms,
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
    async handle(ctx) {
      const { request, prompt, stream, includeUsage, echo, logprobs } = acceptedRequest(
        parseCompletionRequest(ctx.body, { requestId: ctx.requestId }),
      );
      const generation = await startTextGeneration(ctx, deps, request);
      const { inference, servingId, shownModel } = generation;

      // Counted as Generate will take it: a prompt that cannot fit the context is refused before it is tokenized.
      const counted = await inference.countTokens({ model: servingId, rawPrompt: prompt }, { signal: ctx.signal }).catch((err: unknown) => {
        throw inClientTerms(err, servingId, shownModel);
      });
      await ctx.admit(UsageKind.TEXT, counted.tokens + (request.options?.maxTokens ?? 0));

      const meta = createTextCompletionMeta({ model: shownModel, prompt, echo, logprobs });
      return answerGeneration(
        ctx,
        generation,
        { stream, promptTokens: counted.tokens, streamStallTimeoutMs: deps.streamStallTimeoutMs },
        {
          collect: (events) => collectTextCompletion(events, meta),
          usageOf: ({ usage }) => ({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }),
          stream: (sse, events) => streamGeneration(sse, events, createTextChunker(meta, { includeUsage }), streamErrorBody),
        },
      );
    },
  });
}
