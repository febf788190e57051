import { collectCompletion, createCompletionMeta, streamCompletion } from "../mappers/chat.js";
import { streamErrorBody, type TextRouteDeps, textRoute } from "./text-generation.js";

/** POST /v1/chat/completions: the chat-templated prompt, answered as chat.completion(.chunk)s. */
export function chatCompletionsRoute(deps: TextRouteDeps) {
  return textRoute(deps, {
    path: "/v1/chat/completions",
    prepare: "chat",
    answer({ request, includeUsage }, generation) {
      const meta = createCompletionMeta({
        model: generation.shownModel,
        reasoning: request.options?.enableThinking ?? false,
        logprobs: request.options?.logprobs ?? false,
      });
      return {
        collect: (events) => collectCompletion(events, meta),
        usageOf: ({ usage }) => ({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }),
        stream: (sse, events) => streamCompletion(sse, events, meta, streamErrorBody, { includeUsage }),
      };
    },
  });
}
