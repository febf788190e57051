import { create, type JsonObject } from "@bufbuild/protobuf";
import {
  ChatMessageSchema,
  ContentPartSchema,
  GenerateRequestSchema,
  ResponseFormatType,
  Role,
  ToolChoiceMode,
  type ChatMessage,
  type ContentPart,
  type GenerateRequest,
  type ResponseFormat,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
} from "../../gen/tessera/inference/v1/inference_pb.js";

export * from "./chat-response.js";

/**
 * OpenAI chat-completion request JSON → inference GenerateRequest.
 *
 * Validates every field of the API document's request table and what OpenAI SDK users send,
 * and names the offending field in `param` (`messages[2].role`). Fields the service ignores
 * (temperature, seed, top_p, …) are accepted whatever their type; unknown fields are ignored.
 */

export interface ChatDefaults {
  /** Goes to GenerateRequest.request_id. */
  requestId?: string;
  /** max_tokens when the request has none. Default 1024. */
  maxTokens?: number;
  /** Larger max_tokens are lowered to this. Default 8192. */
  maxTokensCap?: number;
  /** Most messages in one request. Default MAX_MESSAGES. */
  maxMessages?: number;
  /** Most characters in one message (text, reasoning, tool-call arguments). Default MAX_MESSAGE_CHARS. */
  maxMessageChars?: number;
}

export const DEFAULT_MAX_TOKENS = 1024;
export const MAX_TOKENS_CAP = 8192;
/** OpenAI's own limits: 4 stop sequences, 128 tools, tool names of [a-zA-Z0-9_-]{1,64}. */
export const MAX_STOP_SEQUENCES = 4;
export const MAX_TOOLS = 128;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** Nesting allowed in the JSON passed through as is (schemas, tool parameters). */
export const MAX_SCHEMA_DEPTH = 64;
/**
 * Messages per request and characters per message. Far above any context served here (1 Mi
 * characters is about 250k tokens), they bound the work done on a request before the model's
 * own context check: tokenizing costs about 1 µs per character of the event loop's time.
 */
export const MAX_MESSAGES = 2048;
export const MAX_MESSAGE_CHARS = 1024 * 1024;
/** Longest `data:` URL of an image, about 3 MiB of image. */
export const MAX_IMAGE_URL_CHARS = 4 * 1024 * 1024;

export interface ChatRequestError {
  message: string;
  /** The request field at fault, e.g. `messages[2].role`; null for the body as a whole. */
  param: string | null;
  /** OpenAI-style code: missing_required_parameter, invalid_type, invalid_value, empty_array. */
  code: string | null;
}

export type ParsedChatRequest =
  | { ok: true; request: GenerateRequest; stream: boolean; includeUsage: boolean }
  | { ok: false; error: ChatRequestError };

export function parseChatRequest(body: unknown, defaults: ChatDefaults = {}): ParsedChatRequest {
  try {
    return { ok: true, ...readRequest(body, defaults) };
  } catch (err) {
    if (err instanceof Invalid) return { ok: false, error: { message: err.message, param: err.param, code: err.code } };
    throw err;
  }
}

class Invalid extends Error {
  constructor(
    message: string,
    readonly param: string | null,
    readonly code: string,
  ) {
    super(message);
  }
}

type Json = Record<string, unknown>;

function readRequest(body: unknown, defaults: ChatDefaults) {
  if (!isObject(body)) {
    throw new Invalid(`The request body must be a JSON object, but got ${typeName(body)} instead.`, null, "invalid_type");
  }

  const model = body["model"];
  if (model === undefined || model === null) throw missing("model");
  if (typeof model !== "string") throw wrongType("model", "a string", model);
  if (model.trim() === "") throw new Invalid("Invalid 'model': must not be empty.", "model", "invalid_value");

  const n = body["n"];
  if (n !== undefined && n !== null) {
    if (typeof n !== "number") throw wrongType("n", "an integer", n);
    if (!Number.isInteger(n) || n < 1) throw new Invalid("Invalid 'n': must be a positive integer.", "n", "invalid_value");
    if (n > 1) throw new Invalid("Invalid 'n': only one choice per request is supported (n = 1).", "n", "invalid_value");
  }

  const stream = optionalBoolean(body, "stream", "stream") ?? false;
  const streamOptions = optionalObject(body["stream_options"], "stream_options");
  const includeUsage = streamOptions ? (optionalBoolean(streamOptions, "include_usage", "stream_options.include_usage") ?? false) : false;
  // Tessera's extension: a `denoising` chunk per forward (README, "Live denoising"); only a stream carries it.
  const includeDenoising =
    stream && streamOptions ? (optionalBoolean(streamOptions, "include_denoising", "stream_options.include_denoising") ?? false) : false;

  const maxTokens = readMaxTokens(body, defaults);
  const stop = readStop(body["stop"]);
  const responseFormat = readResponseFormat(body["response_format"]);
  const tools = readTools(body["tools"]);
  const toolChoice = readToolChoice(body["tool_choice"], tools);
  const kwargs = optionalObject(body["chat_template_kwargs"], "chat_template_kwargs");
  const enableThinking = kwargs ? (optionalBoolean(kwargs, "enable_thinking", "chat_template_kwargs.enable_thinking") ?? false) : false;
  const messages = readMessages(body["messages"], defaults.maxMessages ?? MAX_MESSAGES, defaults.maxMessageChars ?? MAX_MESSAGE_CHARS);

  const request = create(GenerateRequestSchema, {
    requestId: defaults.requestId ?? "",
    model,
    messages,
    tools,
    options: {
      maxTokens,
      stop,
      responseFormat,
      enableThinking,
      toolChoice,
      includeDenoising,
    },
  });
  return { request, stream, includeUsage };
}

// --- scalar fields -----------------------------------------------------------------------------

function readMaxTokens(body: Json, defaults: ChatDefaults): number {
  // max_completion_tokens is OpenAI's current name; max_tokens the older one. Both are checked.
  const completion = positiveInteger(body["max_completion_tokens"], "max_completion_tokens");
  const legacy = positiveInteger(body["max_tokens"], "max_tokens");
  const cap = defaults.maxTokensCap ?? MAX_TOKENS_CAP;
  return Math.min(completion ?? legacy ?? defaults.maxTokens ?? DEFAULT_MAX_TOKENS, cap);
}

function positiveInteger(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number") throw wrongType(param, "an integer", value);
  if (!Number.isInteger(value) || value < 1) {
    throw new Invalid(`Invalid '${param}': expected a positive integer, but got ${String(value)} instead.`, param, "invalid_value");
  }
  return value;
}

function readStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === "string" ? [value] : value;
  if (!Array.isArray(list)) throw wrongType("stop", "a string or an array of strings", value);
  if (list.length > MAX_STOP_SEQUENCES) {
    throw new Invalid(
      `Invalid 'stop': at most ${MAX_STOP_SEQUENCES} stop sequences are allowed, but got ${list.length}.`,
      "stop",
      "invalid_value",
    );
  }
  return list.map((item, i) => {
    const param = typeof value === "string" ? "stop" : `stop[${i}]`;
    if (typeof item !== "string") throw wrongType(param, "a string", item);
    if (item === "") throw new Invalid(`Invalid '${param}': a stop sequence must not be empty.`, param, "invalid_value");
    return item;
  });
}

function readResponseFormat(value: unknown): ResponseFormat | undefined {
  const format = optionalObject(value, "response_format");
  if (format === undefined) return undefined;
  const type = format["type"];
  if (type === undefined || type === null) throw missing("response_format.type");
  switch (type) {
    case "text":
      return { $typeName: "tessera.inference.v1.ResponseFormat", type: ResponseFormatType.TEXT };
    case "json_object":
      return { $typeName: "tessera.inference.v1.ResponseFormat", type: ResponseFormatType.JSON_OBJECT };
    case "json_schema": {
      const schema = format["json_schema"];
      if (schema === undefined || schema === null) throw missing("response_format.json_schema");
      if (!isObject(schema)) throw wrongType("response_format.json_schema", "an object", schema);
      checkDepth(schema, "response_format.json_schema");
      return {
        $typeName: "tessera.inference.v1.ResponseFormat",
        type: ResponseFormatType.JSON_SCHEMA,
        jsonSchema: schema as JsonObject,
      };
    }
    default:
      throw badValue("response_format.type", type, ["text", "json_object", "json_schema"]);
  }
}

function optionalBoolean(object: Json, key: string, param: string): boolean | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") throw wrongType(param, "a boolean", value);
  return value;
}

function optionalObject(value: unknown, param: string): Json | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw wrongType(param, "an object", value);
  return value;
}

// --- tools -------------------------------------------------------------------------------------

function readTools(value: unknown): ToolDefinition[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw wrongType("tools", "an array", value);
  if (value.length > MAX_TOOLS) {
    throw new Invalid(`Invalid 'tools': at most ${MAX_TOOLS} tools are allowed, but got ${value.length}.`, "tools", "invalid_value");
  }
  const seen = new Set<string>();
  return value.map((tool: unknown, i) => {
    const at = `tools[${i}]`;
    if (!isObject(tool)) throw wrongType(at, "an object", tool);
    const type = tool["type"];
    if (type === undefined || type === null) throw missing(`${at}.type`);
    if (type !== "function") throw badValue(`${at}.type`, type, ["function"]);
    const fn = tool["function"];
    if (fn === undefined || fn === null) throw missing(`${at}.function`);
    if (!isObject(fn)) throw wrongType(`${at}.function`, "an object", fn);
    const name = fn["name"];
    if (name === undefined || name === null) throw missing(`${at}.function.name`);
    if (typeof name !== "string") throw wrongType(`${at}.function.name`, "a string", name);
    if (!TOOL_NAME.test(name)) {
      throw new Invalid(
        `Invalid '${at}.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.`,
        `${at}.function.name`,
        "invalid_value",
      );
    }
    if (seen.has(name))
      throw new Invalid(`Invalid '${at}.function.name': the tool name '${name}' is used twice.`, `${at}.function.name`, "invalid_value");
    seen.add(name);
    const description = fn["description"];
    if (description !== undefined && description !== null && typeof description !== "string") {
      throw wrongType(`${at}.function.description`, "a string", description);
    }
    const parameters = optionalObject(fn["parameters"], `${at}.function.parameters`);
    if (parameters !== undefined) checkDepth(parameters, `${at}.function.parameters`);
    return {
      $typeName: "tessera.inference.v1.ToolDefinition",
      name,
      description: typeof description === "string" ? description : "",
      parameters: parameters as JsonObject | undefined,
    };
  });
}

function readToolChoice(value: unknown, tools: ToolDefinition[]): ToolChoice | undefined {
  const choice = (c: ToolChoice["choice"]): ToolChoice => ({ $typeName: "tessera.inference.v1.ToolChoice", choice: c });
  if (value === undefined || value === null) {
    return tools.length > 0 ? choice({ case: "mode", value: ToolChoiceMode.AUTO }) : undefined;
  }
  if (typeof value === "string") {
    switch (value) {
      case "auto":
        return choice({ case: "mode", value: ToolChoiceMode.AUTO });
      case "none":
        return choice({ case: "mode", value: ToolChoiceMode.NONE });
      case "required":
        if (tools.length === 0)
          throw new Invalid("Invalid 'tool_choice': 'required' needs at least one tool in 'tools'.", "tool_choice", "invalid_value");
        return choice({ case: "mode", value: ToolChoiceMode.REQUIRED });
      default:
        throw badValue("tool_choice", value, ["auto", "none", "required"]);
    }
  }
  if (!isObject(value)) throw wrongType("tool_choice", "a string or an object", value);
  const type = value["type"];
  if (type === undefined || type === null) throw missing("tool_choice.type");
  if (type !== "function") throw badValue("tool_choice.type", type, ["function"]);
  const fn = value["function"];
  if (fn === undefined || fn === null) throw missing("tool_choice.function");
  if (!isObject(fn)) throw wrongType("tool_choice.function", "an object", fn);
  const name = fn["name"];
  if (name === undefined || name === null) throw missing("tool_choice.function.name");
  if (typeof name !== "string") throw wrongType("tool_choice.function.name", "a string", name);
  if (!tools.some((tool) => tool.name === name)) {
    throw new Invalid(
      `Invalid 'tool_choice.function.name': no tool named '${name}' is in 'tools'.`,
      "tool_choice.function.name",
      "invalid_value",
    );
  }
  return choice({ case: "functionName", value: name });
}

// --- messages ----------------------------------------------------------------------------------

const ROLES: Record<string, Role> = {
  system: Role.SYSTEM,
  developer: Role.SYSTEM,
  user: Role.USER,
  assistant: Role.ASSISTANT,
  tool: Role.TOOL,
};

function readMessages(value: unknown, maxMessages: number, maxChars: number): ChatMessage[] {
  if (value === undefined || value === null) throw missing("messages");
  if (!Array.isArray(value)) throw wrongType("messages", "an array", value);
  if (value.length === 0) {
    throw new Invalid(
      "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      "messages",
      "empty_array",
    );
  }
  if (value.length > maxMessages) {
    throw new Invalid(
      `Invalid 'messages': array too long. Expected an array with maximum length ${maxMessages}, but got an array with length ${value.length} instead.`,
      "messages",
      "array_above_max_length",
    );
  }
  const callIds = new Set<string>();
  return value.map((message: unknown, i) => {
    const read = readMessage(message, `messages[${i}]`, callIds);
    const chars = messageChars(read);
    if (chars > maxChars) {
      throw new Invalid(
        `Invalid 'messages[${i}]': message too long. Expected at most ${maxChars} characters of text, but got ${chars} instead.`,
        `messages[${i}].content`,
        "string_above_max_length",
      );
    }
    return read;
  });
}

/** Characters of a message's text: content, reasoning, tool-call names and arguments. */
function messageChars(message: ChatMessage): number {
  let chars = message.reasoning.length + message.name.length;
  for (const part of message.content) if (part.part.case === "text") chars += part.part.value.length;
  for (const call of message.toolCalls) chars += call.name.length + call.arguments.length;
  return chars;
}

function readMessage(message: unknown, at: string, callIds: Set<string>): ChatMessage {
  if (!isObject(message)) throw wrongType(at, "an object", message);
  const roleName = message["role"];
  if (roleName === undefined || roleName === null) throw missing(`${at}.role`);
  if (typeof roleName !== "string") throw wrongType(`${at}.role`, "a string", roleName);
  const role = Object.hasOwn(ROLES, roleName) ? ROLES[roleName] : undefined;
  if (role === undefined) throw badValue(`${at}.role`, roleName, Object.keys(ROLES));

  const name = message["name"];
  if (name !== undefined && name !== null && typeof name !== "string") throw wrongType(`${at}.name`, "a string", name);

  const out = create(ChatMessageSchema, { role, name: typeof name === "string" ? name : "" });
  const contentValue = message["content"];

  switch (role) {
    case Role.SYSTEM:
      out.content = readContent(contentValue, `${at}.content`, { images: false, nullable: false });
      break;
    case Role.USER:
      out.content = readContent(contentValue, `${at}.content`, { images: true, nullable: false });
      break;
    case Role.ASSISTANT: {
      out.toolCalls = readAssistantToolCalls(message["tool_calls"], `${at}.tool_calls`);
      for (const call of out.toolCalls) callIds.add(call.id);
      const nullable = out.toolCalls.length > 0;
      out.content = readContent(contentValue, `${at}.content`, { images: false, nullable });
      // Clients that keep the model's reasoning send it back; it is context, never required.
      const reasoning = message["reasoning"] ?? message["reasoning_content"];
      if (typeof reasoning === "string") out.reasoning = reasoning;
      break;
    }
    case Role.TOOL: {
      out.content = readContent(contentValue, `${at}.content`, { images: false, nullable: false });
      const id = message["tool_call_id"];
      if (id === undefined || id === null) throw missing(`${at}.tool_call_id`);
      if (typeof id !== "string") throw wrongType(`${at}.tool_call_id`, "a string", id);
      if (!callIds.has(id)) {
        throw new Invalid(
          `Invalid '${at}.tool_call_id': '${id}' answers no tool call of an earlier assistant message.`,
          `${at}.tool_call_id`,
          "invalid_value",
        );
      }
      out.toolCallId = id;
      break;
    }
  }
  return out;
}

function readContent(value: unknown, at: string, allow: { images: boolean; nullable: boolean }): ContentPart[] {
  if (value === undefined || value === null) {
    if (allow.nullable) return [];
    throw missing(at);
  }
  if (typeof value === "string") return [textPart(value)];
  if (!Array.isArray(value)) throw wrongType(at, "a string or an array of content parts", value);
  if (value.length === 0 && !allow.nullable) {
    throw new Invalid(
      `Invalid '${at}': empty array. Expected an array with minimum length 1, but got an empty array instead.`,
      at,
      "empty_array",
    );
  }
  return value.map((part: unknown, i) => readPart(part, `${at}[${i}]`, allow.images));
}

function readPart(part: unknown, at: string, images: boolean): ContentPart {
  if (!isObject(part)) throw wrongType(at, "an object", part);
  const type = part["type"];
  if (type === undefined || type === null) throw missing(`${at}.type`);
  const allowed = images ? ["text", "image_url"] : ["text"];
  if (type === "text") {
    const text = part["text"];
    if (text === undefined || text === null) throw missing(`${at}.text`);
    if (typeof text !== "string") throw wrongType(`${at}.text`, "a string", text);
    return textPart(text);
  }
  if (type === "image_url" && images)
    return create(ContentPartSchema, { part: { case: "imageUrl", value: readImageUrl(part["image_url"], `${at}.image_url`) } });
  throw badValue(`${at}.type`, type, allowed);
}

function readImageUrl(value: unknown, at: string): { url: string; detail: string } {
  if (value === undefined || value === null) throw missing(at);
  // Some clients send the URL itself instead of {url}.
  const image = typeof value === "string" ? { url: value } : value;
  if (!isObject(image)) throw wrongType(at, "an object", value);
  const url = image["url"];
  if (url === undefined || url === null) throw missing(`${at}.url`);
  if (typeof url !== "string") throw wrongType(`${at}.url`, "a string", url);
  if (url.length > MAX_IMAGE_URL_CHARS) {
    throw new Invalid(
      `Invalid '${at}.url': the image is too large. Expected a data: URL of at most ${MAX_IMAGE_URL_CHARS} characters, but got ${url.length} instead.`,
      `${at}.url`,
      "string_above_max_length",
    );
  }
  if (!/^data:image\/[a-z0-9.+-]+;base64,/i.test(url)) {
    throw new Invalid(
      `Invalid '${at}.url': only data: URLs of base64 images (data:image/png;base64,…) are accepted; remote URLs are never fetched.`,
      `${at}.url`,
      "invalid_value",
    );
  }
  const detail = image["detail"];
  if (detail !== undefined && detail !== null && detail !== "auto" && detail !== "low" && detail !== "high") {
    throw badValue(`${at}.detail`, detail, ["auto", "low", "high"]);
  }
  return { url, detail: typeof detail === "string" ? detail : "" };
}

function textPart(text: string): ContentPart {
  return create(ContentPartSchema, { part: { case: "text", value: text } });
}

function readAssistantToolCalls(value: unknown, at: string): ToolCall[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw wrongType(at, "an array", value);
  return value.map((call: unknown, i): ToolCall => {
    const c = `${at}[${i}]`;
    if (!isObject(call)) throw wrongType(c, "an object", call);
    const id = call["id"];
    if (id === undefined || id === null) throw missing(`${c}.id`);
    if (typeof id !== "string") throw wrongType(`${c}.id`, "a string", id);
    if (id === "") throw new Invalid(`Invalid '${c}.id': must not be empty.`, `${c}.id`, "invalid_value");
    const type = call["type"];
    if (type !== undefined && type !== null && type !== "function") throw badValue(`${c}.type`, type, ["function"]);
    const fn = call["function"];
    if (fn === undefined || fn === null) throw missing(`${c}.function`);
    if (!isObject(fn)) throw wrongType(`${c}.function`, "an object", fn);
    const name = fn["name"];
    if (name === undefined || name === null) throw missing(`${c}.function.name`);
    if (typeof name !== "string") throw wrongType(`${c}.function.name`, "a string", name);
    const args = fn["arguments"];
    let argumentsText: string;
    if (args === undefined || args === null) argumentsText = "{}";
    else if (typeof args === "string") argumentsText = args;
    else if (isObject(args)) argumentsText = JSON.stringify(args);
    else throw wrongType(`${c}.function.arguments`, "a string", args);
    return { $typeName: "tessera.inference.v1.ToolCall", id, name, arguments: argumentsText };
  });
}

/** Refuses JSON nested deeper than MAX_SCHEMA_DEPTH (it is copied into protobuf Structs recursively). */
function checkDepth(value: unknown, param: string): void {
  let level: unknown[] = [value];
  for (let depth = 1; level.length > 0; depth++) {
    if (depth > MAX_SCHEMA_DEPTH) {
      throw new Invalid(`Invalid '${param}': nested deeper than ${MAX_SCHEMA_DEPTH} levels.`, param, "invalid_value");
    }
    const next: unknown[] = [];
    for (const item of level) {
      if (typeof item === "object" && item !== null) next.push(...Object.values(item));
    }
    level = next;
  }
}

// --- errors ------------------------------------------------------------------------------------

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return "a string";
    case "number":
      return Number.isInteger(value) ? "an integer" : "a decimal";
    case "boolean":
      return "a boolean";
    case "object":
      return "an object";
    default:
      return typeof value;
  }
}

function missing(param: string): Invalid {
  return new Invalid(`Missing required parameter: '${param}'.`, param, "missing_required_parameter");
}

function wrongType(param: string, expected: string, got: unknown): Invalid {
  return new Invalid(`Invalid type for '${param}': expected ${expected}, but got ${typeName(got)} instead.`, param, "invalid_type");
}

function badValue(param: string, got: unknown, supported: readonly string[]): Invalid {
  const shown = typeof got === "string" ? `'${got.slice(0, 100)}'` : typeName(got);
  const list = supported.map((s) => `'${s}'`).join(", ");
  return new Invalid(`Invalid value for '${param}': ${shown}. Supported values are: ${list}.`, param, "invalid_value");
}
