import { collectTextCompletion, createTextChunker, createTextCompletionMeta } from "../mappers/completion.js";
import { streamGeneration } from "../mappers/generation-stream.js";
import { admitGeneration, streamErrorBody, type TextRouteDeps, textRoute } from "./text-generation.js";

/**
 * POST /v1/completions, OpenAI's legacy completions: the prompt continued as it is (no chat
 * template, GenerateRequest.raw_prompt), with the same order, gate charge and errors as chat
 * completions (textRoute).
 */
export function completionsRoute(deps: TextRouteDeps) {
  return textRoute(deps, {
    path: "/v1/completions",
    prepare: "completion",
    // Counted as Generate will take it: a prompt that cannot fit the context is refused before it is tokenized.
    admit: (ctx, generation, { request, prompt }) => admitGeneration(ctx, generation, { rawPrompt: prompt }, request.options?.maxTokens),
    answer({ prompt, echo, logprobs, includeUsage }, { shownModel }) {
      const meta = createTextCompletionMeta({ model: shownModel, prompt, echo, logprobs });
      return {
        collect: (events) => collectTextCompletion(events, meta),
        usageOf: ({ usage }) => ({ promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }),
        stream: (sse, events) => streamGeneration(sse, events, createTextChunker(meta, { includeUsage }), streamErrorBody),
      };
    },
  });
}
