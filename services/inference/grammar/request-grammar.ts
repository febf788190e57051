import { ResponseFormatType, type ToolDefinition } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { ChatInput, ChatPrompt } from "../prompt/chat-prompt.js";
import { InvalidRequest } from "../core/engine-errors.js";
import type { TextTokenizer } from "../prompt/tokenizer.js";
import type { GrammarSpec } from "./grammar-spec.js";
import type { ChatSpecialTokens } from "../core/model-config.js";
import type { GrammarPool } from "./grammar-client.js";
import type { FinishRules } from "./loop-guard.js";
import type { GrammarOptions } from "./model-grammars.js";
import { SchemaError } from "./schema-check.js";
import type { SequenceGrammar } from "./sequence-grammar.js";

/**
 * The grammar a chat request's reply must follow, or undefined for free text:
 * - a forced tool call (named, or `required`): the call's arguments follow the tool's parameters;
 * - response_format json_schema: the schema (enforced whether or not `strict` is set);
 *   json_object: a JSON object;
 * - tools offered with tool_choice auto: text, or tool calls each complete and of an offered tool.
 * A forced call wins over a JSON response format (the reply is the call); a JSON response
 * format wins over auto tools (the reply is JSON, as asked).
 */
export function grammarSpecOf(prompt: ChatPrompt, input: ChatInput): GrammarSpec | undefined {
  const { parser, variables } = prompt;
  if (parser.forcedTool !== undefined) {
    const tool = findTool(input.tools, parser.forcedTool);
    return { kind: "tool_arguments", tool: parser.forcedTool, parameters: tool?.parameters };
  }
  if (parser.jsonMode) {
    const format = input.options?.responseFormat;
    const schema = format?.type === ResponseFormatType.JSON_SCHEMA ? format.jsonSchema?.schema : undefined;
    return schema !== undefined && schema !== null ? { kind: "json_schema", schema } : { kind: "json_object" };
  }
  if (parser.toolCalls === true && variables.tools.length > 0) {
    return { kind: "tool_calls", tools: variables.tools.map((t) => ({ name: t.function.name, parameters: t.function.parameters })) };
  }
  return undefined;
}

/** The grammar options of a pool's models: compiled-grammar cache, budgets, compile threads. */
export type ModelGrammarOptions = GrammarOptions & { workers?: number };

function findTool(tools: readonly ToolDefinition[], name: string): ToolDefinition | undefined {
  return tools.find((t) => t.name === name);
}

/**
 * Tags the reply parser acts on that the grammar never needs from the model: the thinking
 * delimiters, a call's end (forced text, committed by jump-forward), and tool responses.
 */
const unguessedTags = (tags: ChatSpecialTokens) => [...tags.thinking, tags.toolCall[1], "<tool_response>", "</tool_response>"];

/**
 * Starts the grammar of `spec` for one reply on the model's grammar worker (compiled there, or
 * found cached). A schema the grammar cannot enforce is refused with InvalidRequest naming the
 * problem.
 */
export async function sequenceGrammar(
  worker: GrammarPool,
  spec: GrammarSpec,
  tokenizer: TextTokenizer,
  options: {
    thinking: boolean;
    threshold: number;
    vocab: number;
    /** The model's tokens that are never a reply token (mask, pad). */
    banned: readonly number[];
    /** The model's delimiters (its config's `special_tokens`). */
    tags: ChatSpecialTokens;
    /** The loop guard and length budgets (loop-guard.ts). */
    finish?: FinishRules;
    /** The reply's max_tokens, for the reply budget. */
    maxTokens?: number;
    onCompile?: (seconds: number) => void;
  },
): Promise<SequenceGrammar> {
  const tags = unguessedTags(options.tags)
    .map((tag) => tokenizer.tokenId(tag))
    .filter((id) => id !== undefined);
  const rules = {
    threshold: options.threshold,
    vocab: options.vocab,
    banned: [...options.banned, ...tags],
    ...(options.finish !== undefined ? { finish: options.finish } : {}),
    ...(options.maxTokens !== undefined ? { maxTokens: options.maxTokens } : {}),
  };
  const freeUntil = options.thinking ? tokenizer.tokenId(options.tags.thinking[1]) : undefined;
  try {
    return await worker.start(spec, rules, {
      ...(freeUntil !== undefined ? { freeUntil } : {}),
      ...(options.onCompile !== undefined ? { onCompile: options.onCompile } : {}),
    });
  } catch (err) {
    if (err instanceof SchemaError) throw new InvalidRequest(err.message, specParam(spec));
    throw err;
  }
}

/** The request field holding the schema a refusal is about (chat's names). */
function specParam(spec: GrammarSpec): string {
  return spec.kind === "json_schema" || spec.kind === "json_object" ? "response_format.json_schema.schema" : "tools";
}
