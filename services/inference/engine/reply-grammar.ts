import { bannedTokenIds } from "../core/banned-tokens.js";
import { grammarPoolFor } from "../grammar/grammar-client.js";
import { grammarSpecOf, type ModelGrammarOptions, sequenceGrammar } from "../grammar/request-grammar.js";
import type { SequenceGrammar } from "../grammar/sequence-grammar.js";
import type { ChatInput, ChatPrompt } from "../prompt/chat-prompt.js";
import type { ModelRuntime } from "./runtime.js";

/**
 * The reply's grammar on the model's grammar threads (InvalidArgument for a schema it cannot
 * enforce), or undefined for free text; `maxTokens` is the request's, resolved (the reply budget).
 * Counted in the model's metrics.
 */
export async function replyGrammar(
  runtime: ModelRuntime,
  options: ModelGrammarOptions,
  prompt: ChatPrompt,
  input: ChatInput,
  maxTokens: number,
): Promise<SequenceGrammar | undefined> {
  const spec = grammarSpecOf(prompt, input);
  if (spec === undefined) return undefined;
  const { vocabSize, eosTokenId } = runtime.decode;
  const { metrics, name } = runtime;
  const tags = runtime.model.config.specialTokens;
  const worker = grammarPoolFor(runtime.model.dir, vocabSize, eosTokenId, { ...options, tags });
  const sequence = await sequenceGrammar(worker, spec, runtime.model.tokenizer, {
    thinking: prompt.parser.thinking && prompt.parser.forcedTool === undefined,
    threshold: runtime.threshold,
    vocab: vocabSize,
    banned: bannedTokenIds(runtime.decode),
    tags,
    ...(options.finish !== undefined ? { finish: options.finish } : {}),
    maxTokens,
    onCompile: (seconds) => metrics?.grammarCompileSeconds.observe({ model: name }, seconds),
  });
  metrics?.constrainedRequests.inc({ model: name, kind: spec.kind });
  return sequence;
}
