import { ResponseFormatType } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { CountRequest, GenerationRequest } from "../core/model-engine.js";
import { InvalidRequest } from "../core/engine-errors.js";
import type { ModelRuntime } from "./runtime.js";
import { checkSchema, SchemaError, type SchemaLimits } from "../grammar/schema-check.js";
import { buildChatPrompt, type ChatInput, type ChatPrompt, type ChatTemplateVariables } from "../prompt/chat-prompt.js";
import { checkRawPromptRequest } from "../prompt/raw-prompt.js";
import { chooseRequiredTool, longestForcedPrompt, type RenderTemplate, type RequiredToolChoice } from "./required-tool.js";
import { chatTextBytes, refuseIfCannotFit } from "../prompt/text-bound.js";
import { TemplateRenderError } from "../prompt/text-ops.js";
import { escapeChatVariables } from "../prompt/user-text.js";

/** A mask model's prompt for one generation: rendered and tokenized, the required tool chosen if any. */
export interface GenerationPrompt {
  prompt: ChatPrompt;
  ids: number[];
  /** tool_choice "required" with several tools: the chosen tool and how long choosing took. */
  choice: (RequiredToolChoice & { ms: number }) | undefined;
}

const invalid = (message: string) => new InvalidRequest(message);

/**
 * The prompt a generation runs on, rendered and tokenized. With tool_choice "required" and
 * several tools, the tool is chosen first (required-tool.ts: one Score readout) and forced.
 */
export async function generationPrompt(
  runtime: ModelRuntime,
  modelId: string,
  input: ChatInput,
  limits: SchemaLimits | undefined,
  signal: AbortSignal,
): Promise<GenerationPrompt> {
  boundChat(runtime, modelId, input, limits);
  const built = buildChatPrompt(modelId, runtime.model.config.capabilities, input);
  if (built.requiredTools.length === 0) {
    return { prompt: built, ids: await renderEncode(runtime, built.variables), choice: undefined };
  }
  const started = performance.now();
  const choice = await chooseRequiredTool(runtime, built, { model: modelId, render: templateOf(runtime) }, signal);
  const ms = Math.round(performance.now() - started);
  return { prompt: choice.prompt, ids: await runtime.model.text.encodePrompt(choice.text), choice: { ...choice, ms } };
}

/**
 * CountTokens: a raw prompt's tokens, a plain text's, or a conversation's prompt; with
 * tool_choice "required" and several tools (the tool not chosen yet), the longest of their
 * forced prompts.
 */
export async function countPromptTokens(runtime: ModelRuntime, req: CountRequest, limits: SchemaLimits | undefined): Promise<number> {
  if (req.rawPrompt !== undefined) return (await rawPromptIds(runtime, req, req.rawPrompt)).length;
  if (req.messages.length === 0) return (await runtime.model.text.encode(req.text)).length;
  const input = { messages: req.messages, tools: req.tools, options: req.options };
  boundChat(runtime, req.model, input, limits);
  const built = buildChatPrompt(req.model, runtime.model.config.capabilities, input);
  if (built.requiredTools.length === 0) return (await renderEncode(runtime, built.variables)).length;
  const tokenizer = runtime.model.tokenizer;
  return tokenizer.userText.encode(longestForcedPrompt(tokenizer, built, { model: req.model, render: templateOf(runtime) })).length;
}

/** A raw prompt's tokens (Generate and CountTokens): checked, bounded by its bytes, then tokenized on the text worker. */
export async function rawPromptIds(runtime: ModelRuntime, req: GenerationRequest | CountRequest, raw: string): Promise<number[]> {
  checkRawPromptRequest(req, raw);
  refuseIfCannotFit("the prompt", Buffer.byteLength(raw), runtime.model.maxTokenBytes, runtime.decode.maxPositions, req.model);
  return await runtime.model.text.encode(raw);
}

/** The model's chat template over escaped user text (user-text.ts); a conversation it cannot render is refused (InvalidArgument). */
function templateOf(runtime: ModelRuntime): RenderTemplate {
  return (variables) => {
    try {
      return runtime.model.renderChat(escapeChatVariables(variables, runtime.model.tokenizer.userText));
    } catch (err) {
      throw invalid(`the chat template cannot render this conversation: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
}

/**
 * A conversation that cannot fit the context whatever its tokens is refused before any
 * rendering. A response schema the grammar cannot take is named first (the bound counts it).
 */
function boundChat(runtime: ModelRuntime, modelId: string, input: ChatInput, limits: SchemaLimits | undefined): void {
  const format = input.options?.responseFormat;
  const schema = format?.type === ResponseFormatType.JSON_SCHEMA ? format.jsonSchema?.schema : undefined;
  if (schema !== undefined && schema !== null) {
    try {
      checkSchema(schema, "response_format.json_schema.schema", limits);
    } catch (err) {
      throw err instanceof SchemaError ? new InvalidRequest(err.message, "response_format.json_schema.schema") : err;
    }
  }
  const context = runtime.decode.maxPositions;
  const { maxTokenBytes } = runtime.model;
  refuseIfCannotFit("the conversation", chatTextBytes(input, context * maxTokenBytes), maxTokenBytes, context, modelId);
}

/** Renders and tokenizes a conversation off the event loop (the text worker). */
async function renderEncode(runtime: ModelRuntime, variables: ChatTemplateVariables): Promise<number[]> {
  try {
    return await runtime.model.text.renderEncode(variables);
  } catch (err) {
    if (err instanceof TemplateRenderError) throw invalid(`the chat template cannot render this conversation: ${err.message}`);
    throw err;
  }
}
