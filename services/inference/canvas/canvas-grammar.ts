/**
 * The grammar of a canvas model's chat reply (docs/constrained-decoding.md, "On a canvas"),
 * started on the model's grammar threads as a mask model's is (grammar/request-grammar.ts):
 * - `response_format` json_schema / json_object: the reply is the JSON value, from its first position;
 * - a forced call (`tool_choice` named, or `required`): the prompt ends at Gemma 4's open tag
 *   `<|tool_call>` and the reply is one call among the forced tools (`gemma4_call`): the model
 *   picks the name under the grammar, the arguments follow its parameters;
 * - `tools` with `tool_choice` auto: free canvases; a canvas that opens a call is cut after the
 *   open tag and the call is decoded under the same `gemma4_call` grammar of every tool.
 * A forced call wins over a JSON response format, which wins over auto tools (as on a mask model).
 */
import type { ChatSpecialTokens } from "../core/model-config.js";
import type { EngineMetrics } from "../core/metrics.js";
import { grammarPoolFor } from "../grammar/grammar-client.js";
import type { GrammarSpec } from "../grammar/grammar-spec.js";
import { grammarSpecOf, type ModelGrammarOptions, sequenceGrammar } from "../grammar/request-grammar.js";
import type { SequenceGrammar } from "../grammar/sequence-grammar.js";
import type { ChatInput, ChatPrompt } from "../prompt/chat-prompt.js";
import type { CanvasConstraint } from "../decoder/canvas/canvas-frontier.js";
import type { CanvasModel } from "../decoder/canvas/canvas-model.js";

/** The frontier rule's threshold on a canvas: the mask models' default (TESSERA_UNMASK_THRESHOLD's). */
const CANVAS_GRAMMAR_THRESHOLD = 0.9;

/** Which grammar a chat reply gets, decided from its prompt before it is tokenized. */
export interface CanvasGrammarPlan {
  spec: GrammarSpec;
  /** `start`: the grammar from the reply's first position; `auto`: opened by a call's open tag. */
  mode: "start" | "auto";
  /** Text appended to the rendered prompt (and fed first to the reply parser): a forced call's open tag, else "". */
  promptSuffix: string;
}

/** The spec of a Gemma 4 call among `names` (every tool of the request when undefined). */
function callSpec(prompt: ChatPrompt, names?: readonly string[]): GrammarSpec {
  const tools = prompt.variables.tools
    .filter((t) => names === undefined || names.includes(t.function.name))
    .map((t) => ({ name: t.function.name, parameters: t.function.parameters }));
  return { kind: "gemma4_call", tools };
}

export function canvasGrammarPlan(prompt: ChatPrompt, input: ChatInput, tags: ChatSpecialTokens): CanvasGrammarPlan | undefined {
  const forced = prompt.parser.forcedTool !== undefined ? [prompt.parser.forcedTool] : prompt.requiredTools;
  if (forced.length > 0) return { spec: callSpec(prompt, forced), mode: "start", promptSuffix: tags.toolCall[0] };
  if (prompt.parser.jsonMode) {
    const spec = grammarSpecOf(prompt, input);
    return spec === undefined ? undefined : { spec, mode: "start", promptSuffix: "" };
  }
  if (prompt.parser.toolCalls !== false && prompt.variables.tools.length > 0)
    return { spec: callSpec(prompt), mode: "auto", promptSuffix: "" };
  return undefined;
}

/**
 * The reply's grammar on the model's grammar threads. A schema the grammar cannot enforce is an
 * InvalidRequest (400), named before the model runs: an auto-tools grammar is compiled here too,
 * and started again where a call opens, with the tokens the reply has left then.
 */
export async function startCanvasGrammar(
  model: Pick<CanvasModel, "dir" | "config" | "tokenizer">,
  options: ModelGrammarOptions,
  plan: CanvasGrammarPlan,
  maxTokens: number,
  observe?: { metrics: EngineMetrics | undefined; name: string },
): Promise<CanvasConstraint> {
  const { config, tokenizer } = model;
  const tags = config.specialTokens;
  const pool = grammarPoolFor(model.dir, config.vocabSize, config.eosTokenId, { ...options, tags });
  const start = (tokens: number): Promise<SequenceGrammar> =>
    sequenceGrammar(pool, plan.spec, tokenizer, {
      // A canvas reply under a grammar starts at the grammar, without a thinking span.
      thinking: false,
      threshold: CANVAS_GRAMMAR_THRESHOLD,
      vocab: config.vocabSize,
      banned: [config.padTokenId],
      tags,
      ...(options.finish !== undefined ? { finish: options.finish } : {}),
      maxTokens: tokens,
      onCompile: (seconds) => observe?.metrics?.grammarCompileSeconds.observe({ model: observe.name }, seconds),
    });
  const first = await start(maxTokens);
  observe?.metrics?.constrainedRequests.inc({ model: observe.name, kind: plan.spec.kind });
  const endToken = config.eosTokenId;
  if (plan.mode === "start") return { grammar: first, endToken };
  first.dispose();
  const token = tokenizer.tokenId(tags.toolCall[0]);
  if (token === undefined) throw new Error(`${model.dir}: the call's open tag ${tags.toolCall[0]} is not one token`);
  return { trigger: { token, open: start }, endToken };
}
