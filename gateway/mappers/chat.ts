import { create, type JsonObject } from "@bufbuild/protobuf";
import {
  type ChatMessage,
  ChatMessageSchema,
  type ContentPart,
  ContentPartSchema,
  type GenerateRequest,
  GenerateRequestSchema,
  type ResponseFormat,
  ResponseFormatSchema,
  ResponseFormatType,
  Role,
  type ToolChoice,
  ToolChoiceMode,
  ToolChoiceSchema,
  ToolCallSchema,
  type ToolDefinition,
  ToolDefinitionSchema,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import { type ChatCompletionRequest, type ChatMessageInput, ChatCompletionRequestSchema } from "../schemas/chat-request.js";
import { type MaxTokensDefaults, resolveMaxTokens } from "../../lib/text-limits.js";
import { PARSE_OPTIONS, type RequestError, requestErrorOf } from "../schemas/request-errors.js";

export * from "./chat-response.js";
export {
  MAX_IMAGE_URL_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_MESSAGES,
  MAX_SCHEMA_DEPTH,
  MAX_TOOLS,
} from "../schemas/chat-request.js";

/**
 * OpenAI chat-completion request JSON → inference GenerateRequest. The request is validated by
 * its schema (gateway/schemas/chat-request.ts); this maps the typed request to protobuf.
 */

/** max_tokens' default (1024) and cap (8192) where a caller sets its own (lib/text-limits.ts resolveMaxTokens). */
export interface ChatDefaults extends MaxTokensDefaults {
  /** Goes to GenerateRequest.request_id. */
  requestId?: string;
}

export type ChatRequestError = RequestError;

export interface ChatLogprobs {
  /** Alternatives per token, 0 to 20. */
  top: number;
}

export type ParsedChatRequest =
  | { ok: true; request: GenerateRequest; stream: boolean; includeUsage: boolean; logprobs: ChatLogprobs | undefined }
  | { ok: false; error: ChatRequestError };

export function parseChatRequest(body: unknown, defaults: ChatDefaults = {}): ParsedChatRequest {
  const parsed = ChatCompletionRequestSchema.safeParse(body, PARSE_OPTIONS);
  if (!parsed.success) return { ok: false, error: requestErrorOf(parsed.error) };
  const chat = parsed.data;
  return {
    ok: true,
    request: generateRequestOf(chat, defaults),
    stream: chat.stream ?? false,
    includeUsage: chat.stream_options?.include_usage ?? false,
    logprobs: chat.logprobs === true ? { top: chat.top_logprobs ?? 0 } : undefined,
  };
}

function generateRequestOf(chat: ChatCompletionRequest, defaults: ChatDefaults): GenerateRequest {
  const tools = (chat.tools ?? []).map((tool) => toolDefinition(tool.function));
  return create(GenerateRequestSchema, {
    requestId: defaults.requestId ?? "",
    model: chat.model,
    messages: chat.messages.map(chatMessage),
    tools,
    options: {
      // max_completion_tokens (OpenAI's current name) wins over max_tokens.
      maxTokens: resolveMaxTokens(chat.max_completion_tokens ?? chat.max_tokens, defaults),
      stop: typeof chat.stop === "string" ? [chat.stop] : (chat.stop ?? []),
      responseFormat: responseFormat(chat.response_format),
      enableThinking: chat.chat_template_kwargs?.enable_thinking ?? false,
      toolChoice: toolChoice(chat.tool_choice, tools.length),
      logprobs: chat.logprobs === true,
      topLogprobs: chat.logprobs === true ? (chat.top_logprobs ?? 0) : 0,
      // Tessera's extension: a `denoising` chunk per forward (README, "Live denoising"); only a stream carries it.
      includeDenoising: (chat.stream ?? false) && (chat.stream_options?.include_denoising ?? false),
    },
  });
}

export function toolDefinition(fn: {
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
}): ToolDefinition {
  return create(ToolDefinitionSchema, {
    name: fn.name,
    description: fn.description ?? "",
    parameters: (fn.parameters ?? undefined) as JsonObject | undefined,
  });
}

export function responseFormat(format: ChatCompletionRequest["response_format"]): ResponseFormat | undefined {
  switch (format?.type) {
    case undefined:
      return undefined;
    case "text":
      return create(ResponseFormatSchema, { type: ResponseFormatType.TEXT });
    case "json_object":
      return create(ResponseFormatSchema, { type: ResponseFormatType.JSON_OBJECT });
    case "json_schema":
      return create(ResponseFormatSchema, { type: ResponseFormatType.JSON_SCHEMA, jsonSchema: format.json_schema as JsonObject });
  }
}

/** With tools and no tool_choice: auto. A function is named as chat does (`function.name`) or as Responses does (`name`). */
export function toolChoice(
  choice: "auto" | "none" | "required" | { function: { name: string } } | { name: string } | null | undefined,
  toolCount: number,
): ToolChoice | undefined {
  if (choice === undefined || choice === null) {
    return toolCount > 0 ? create(ToolChoiceSchema, { choice: { case: "mode", value: ToolChoiceMode.AUTO } }) : undefined;
  }
  if (typeof choice === "object") {
    return create(ToolChoiceSchema, { choice: { case: "functionName", value: "function" in choice ? choice.function.name : choice.name } });
  }
  const mode = { auto: ToolChoiceMode.AUTO, none: ToolChoiceMode.NONE, required: ToolChoiceMode.REQUIRED }[choice];
  return create(ToolChoiceSchema, { choice: { case: "mode", value: mode } });
}

const ROLES: Record<ChatMessageInput["role"], Role> = {
  system: Role.SYSTEM,
  developer: Role.SYSTEM,
  user: Role.USER,
  assistant: Role.ASSISTANT,
  tool: Role.TOOL,
};

function chatMessage(message: ChatMessageInput): ChatMessage {
  const out = create(ChatMessageSchema, { role: ROLES[message.role], name: message.name ?? "", content: contentParts(message.content) });
  if (message.role === "assistant") {
    out.toolCalls = (message.tool_calls ?? []).map((call) => {
      const args = call.function.arguments;
      return create(ToolCallSchema, {
        id: call.id,
        name: call.function.name,
        arguments: args === undefined || args === null ? "{}" : typeof args === "string" ? args : JSON.stringify(args),
      });
    });
    const reasoning = message.reasoning ?? message.reasoning_content;
    if (typeof reasoning === "string") out.reasoning = reasoning;
  }
  if (message.role === "tool") out.toolCallId = message.tool_call_id;
  return out;
}

type ContentInput = ChatMessageInput["content"];

function contentParts(content: ContentInput): ContentPart[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [textPart(content)];
  return content.map((part) =>
    part.type === "text"
      ? textPart(part.text)
      : create(ContentPartSchema, { part: { case: "imageUrl", value: { url: part.image_url.url, detail: part.image_url.detail ?? "" } } }),
  );
}

export function textPart(text: string): ContentPart {
  return create(ContentPartSchema, { part: { case: "text", value: text } });
}
