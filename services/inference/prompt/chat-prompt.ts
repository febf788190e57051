import type { JsonObject } from "@bufbuild/protobuf";
import {
  ResponseFormatType,
  Role,
  ToolChoiceMode,
  type ChatMessage,
  type GenerationOptions,
  type ToolDefinition,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { InvalidRequest } from "../core/engine-errors.js";
import type { ModelCapabilities } from "../core/model-config.js";

/** What the chat template is rendered with (docs/model-contract.md, "Chat template"). */
export interface ChatTemplateVariables {
  messages: TemplateMessage[];
  tools: TemplateTool[];
  tool_choice: "auto" | "none" | "required";
  forced_tool: string;
  response_format: "json" | "";
  json_schema: unknown;
  enable_thinking: boolean;
  add_generation_prompt: boolean;
}

export interface TemplateMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: { id: string; name: string; arguments: string }[];
  reasoning?: string;
}

export interface TemplateTool {
  type: "function";
  function: { name: string; description?: string; parameters?: JsonObject };
}

/** How a prompt ends, which is how its reply is read (the reply parser's options, reply/reply-parser.ts). */
export interface PromptEnding {
  /** The prompt ended in `<think>\n` (ignored with `forcedTool`: the template skips it then). */
  thinking: boolean;
  /** JSON modes: content is the first JSON object of the reply. */
  jsonMode: boolean;
  /** The prompt ended inside a call of this function. */
  forcedTool?: string;
  /** When false (tool_choice "none"), `<tool_call>` spans stay as content. Default true. */
  toolCalls?: boolean;
}

export interface ChatPrompt {
  variables: ChatTemplateVariables;
  /** How the reply of this prompt is parsed (thinking span, JSON mode, tool calls). */
  parser: PromptEnding;
  /**
   * tool_choice "required" with several tools: their names, once each, in request order. One
   * of them must be forced (withForcedTool) before generating: the service picks the one the
   * model finds most probable (engine/required-tool.ts). Empty otherwise.
   */
  requiredTools: string[];
}

export interface ChatInput {
  messages: readonly ChatMessage[];
  tools: readonly ToolDefinition[];
  options: GenerationOptions | undefined;
}

const ROLE_NAMES: Partial<Record<Role, TemplateMessage["role"]>> = {
  [Role.SYSTEM]: "system",
  [Role.USER]: "user",
  [Role.ASSISTANT]: "assistant",
  [Role.TOOL]: "tool",
};

const invalid = (message: string, param?: string) => new InvalidRequest(message, param);

/**
 * Turns a Generate/CountTokens request into chat template variables and reply-parser
 * options, refusing what the model cannot take (images, tools) with InvalidArgument.
 * Text parts of one message are joined with "\n" (as vLLM does). Image parts are refused
 * before any URL is looked at when the model has no image support; a model that claims
 * image support still gets only `data:` URLs, never fetched; with `imageText` (a canvas model
 * with a vision graph) each becomes the text it returns (its image token) where the part is,
 * otherwise the ONNX contract has no image input and those are refused too.
 */
export function buildChatPrompt(
  modelName: string,
  capabilities: ModelCapabilities,
  input: ChatInput,
  imageText?: (dataUrl: string) => string,
): ChatPrompt {
  if (input.messages.length === 0) throw invalid("messages must not be empty");
  const messages = input.messages.map((message, i) => templateMessage(modelName, capabilities, message, i, imageText));

  const options = input.options;
  const choice = options?.toolChoice?.choice;
  let toolChoice: ChatTemplateVariables["tool_choice"] = "auto";
  let forcedTool = "";
  if (choice?.case === "mode") {
    if (choice.value === ToolChoiceMode.NONE) toolChoice = "none";
    if (choice.value === ToolChoiceMode.REQUIRED) toolChoice = "required";
  } else if (choice?.case === "functionName") {
    if (choice.value === "") throw invalid("tool_choice names an empty function name");
    toolChoice = "required";
    forcedTool = choice.value;
  }

  const tools = input.tools.map((tool, i) => templateTool(tool, i));
  const names = new Set(tools.map((t) => t.function.name));
  if (toolChoice !== "none" && tools.length > 0 && !capabilities.tools) {
    throw invalid(`model "${modelName}" does not support tools`);
  }
  if (forcedTool !== "" && !names.has(forcedTool)) {
    throw invalid(`tool_choice names function "${forcedTool}", which is not among the tools`);
  }
  if (toolChoice === "required" && tools.length === 0) throw invalid("tool_choice requires a tool, but no tools were given");
  // "required" with a single tool is that tool by construction; with several, the service
  // forces the one the model finds most probable before generating.
  let requiredTools: string[] = [];
  if (toolChoice === "required" && forcedTool === "") {
    if (names.size === 1) forcedTool = tools[0]!.function.name;
    else requiredTools = [...names];
  }

  const format = options?.responseFormat;
  const jsonMode = format?.type === ResponseFormatType.JSON_OBJECT || format?.type === ResponseFormatType.JSON_SCHEMA;
  let jsonSchema: unknown = "";
  if (format?.type === ResponseFormatType.JSON_SCHEMA && format.jsonSchema !== undefined) {
    // The request's `json_schema` object is {name, schema, strict}; the model is shown the schema.
    const inner = format.jsonSchema.schema;
    jsonSchema = typeof inner === "object" && inner !== null ? inner : format.jsonSchema;
  }

  const enableThinking = (options?.enableThinking ?? false) && capabilities.thinking;
  const toolsShown = toolChoice !== "none" && tools.length > 0;
  return {
    variables: {
      messages,
      tools: toolsShown ? tools : [],
      tool_choice: toolChoice,
      forced_tool: forcedTool,
      response_format: jsonMode ? "json" : "",
      json_schema: jsonSchema,
      enable_thinking: enableThinking,
      add_generation_prompt: true,
    },
    parser: {
      thinking: enableThinking && forcedTool === "",
      jsonMode,
      ...(forcedTool !== "" ? { forcedTool } : {}),
      toolCalls: toolsShown,
    },
    requiredTools,
  };
}

/**
 * The same prompt ending inside a call of `name`, one of its tools: the reply is that call by
 * construction (the template skips the thinking span then). Refuses a name not among the tools.
 */
export function withForcedTool(prompt: ChatPrompt, name: string): ChatPrompt {
  if (name === "" || !prompt.variables.tools.some((t) => t.function.name === name)) {
    throw invalid(`tool_choice: function "${name}" is not among the tools`);
  }
  return {
    variables: { ...prompt.variables, tool_choice: "required", forced_tool: name },
    parser: { ...prompt.parser, thinking: false, forcedTool: name },
    requiredTools: [],
  };
}

function templateMessage(
  modelName: string,
  capabilities: ModelCapabilities,
  message: ChatMessage,
  index: number,
  imageText: ((dataUrl: string) => string) | undefined,
): TemplateMessage {
  const role = ROLE_NAMES[message.role];
  if (role === undefined) throw invalid(`messages[${index}].role is missing or unknown`);
  const texts: string[] = [];
  for (const [j, part] of message.content.entries()) {
    if (part.part.case === "text") {
      texts.push(part.part.value);
    } else if (part.part.case === "imageUrl") {
      // The gateway maps messages and their parts one to one, so these indices are the request's.
      const param = `messages[${index}].content[${j}]`;
      if (!capabilities.images) throw invalid(`model "${modelName}" does not support image input`, param);
      if (!part.part.value.url.startsWith("data:")) {
        throw invalid(
          `messages[${index}]: only data: URLs are accepted for images; remote URLs are never fetched`,
          `${param}.image_url.url`,
        );
      }
      if (imageText === undefined) throw invalid(`model "${modelName}": this engine's model contract has no image input`, param);
      texts.push(imageText(part.part.value.url));
    }
  }
  const out: TemplateMessage = { role, content: texts.join("\n") };
  if (message.name !== "") out.name = message.name;
  if (message.toolCallId !== "") out.tool_call_id = message.toolCallId;
  if (message.reasoning !== "") out.reasoning = message.reasoning;
  if (message.toolCalls.length > 0) {
    if (role !== "assistant") throw invalid(`messages[${index}]: only assistant messages carry tool_calls`);
    out.tool_calls = message.toolCalls.map((call, j) => {
      if (call.name === "") throw invalid(`messages[${index}].tool_calls[${j}].name is required`);
      return { id: call.id, name: call.name, arguments: call.arguments.trim() === "" ? "{}" : call.arguments };
    });
  }
  return out;
}

function templateTool(tool: ToolDefinition, index: number): TemplateTool {
  if (tool.name === "") throw invalid(`tools[${index}].name is required`);
  const fn: TemplateTool["function"] = { name: tool.name };
  if (tool.description !== "") fn.description = tool.description;
  if (tool.parameters !== undefined) fn.parameters = tool.parameters;
  return { type: "function", function: fn };
}
