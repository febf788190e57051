import { create } from "@bufbuild/protobuf";
import {
  type ChatMessage,
  ChatMessageSchema,
  type GenerateRequest,
  GenerateRequestSchema,
  type ResponseFormat,
  Role,
  ToolCallSchema,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import { PARSE_OPTIONS, type RequestError, requestErrorOf } from "../schemas/request-errors.js";
import {
  messageTexts,
  outputTexts,
  reasoningText,
  type ResponsesInputItem,
  type ResponsesRequest,
  ResponsesRequestSchema,
  type ResponsesTextFormat,
} from "../schemas/responses-request.js";
import { resolveMaxTokens } from "../../lib/text-limits.js";
import { type ChatDefaults, responseFormat, textPart, toolChoice, toolDefinition } from "./chat.js";

/**
 * A Responses request → the inference GenerateRequest the chat route builds, so that every
 * rule of chat (constrained JSON and tool-call decoding, tool_choice, thinking, limits) holds
 * here too. `instructions` become the first system message; input items become chat
 * messages: a message item a message of its role (developer is system), a reasoning item the
 * thinking of the assistant turn that follows it, consecutive function_call items the tool
 * calls of one assistant turn (with the assistant message just before them), a
 * function_call_output item a tool message.
 */

export type ParsedResponsesRequest =
  | { ok: true; request: GenerateRequest; stream: boolean; echo: ResponseEcho }
  | { ok: false; error: RequestError };

/** The request fields a response object repeats, as OpenAI's do. */
export interface ResponseEcho {
  instructions: string | null;
  maxOutputTokens: number | null;
  format: Record<string, unknown>;
  toolChoice: "auto" | "none" | "required" | { type: "function"; name: string };
  tools: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  /** `reasoning.effort` as asked (null when none was); thinking is on unless it is absent or "none". */
  effort: string | null;
}

export function parseResponsesRequest(body: unknown, defaults: ChatDefaults = {}): ParsedResponsesRequest {
  const parsed = ResponsesRequestSchema.safeParse(body, PARSE_OPTIONS);
  if (!parsed.success) return { ok: false, error: requestErrorOf(parsed.error) };
  const request = parsed.data;
  return { ok: true, request: generateRequestOf(request, defaults), stream: request.stream ?? false, echo: echoOf(request) };
}

/** Thinking is on when the request has a `reasoning` object whose effort is not "none". */
function thinkingOf(request: Pick<ResponsesRequest, "reasoning">): boolean {
  return request.reasoning !== undefined && request.reasoning !== null && request.reasoning.effort !== "none";
}

function generateRequestOf(request: ResponsesRequest, defaults: ChatDefaults): GenerateRequest {
  const tools = (request.tools ?? []).map(toolDefinition);
  return create(GenerateRequestSchema, {
    requestId: defaults.requestId ?? "",
    model: request.model,
    messages: messagesOf(request),
    tools,
    options: {
      maxTokens: resolveMaxTokens(request.max_output_tokens, defaults),
      responseFormat: responseFormatOf(request.text?.format),
      enableThinking: thinkingOf(request),
      toolChoice: toolChoice(request.tool_choice, tools.length),
    },
  });
}

/** Chat's response_format, whose `json_schema` object is Responses' format less its type: {name, schema, strict, description}. */
function responseFormatOf(format: ResponsesTextFormat | null | undefined): ResponseFormat | undefined {
  if (format?.type !== "json_schema") return responseFormat(format);
  const { type, ...jsonSchema } = format;
  return responseFormat({ type, json_schema: jsonSchema });
}

const ROLES = { user: Role.USER, assistant: Role.ASSISTANT, system: Role.SYSTEM, developer: Role.SYSTEM } as const;

function messagesOf(request: ResponsesRequest): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (request.instructions) messages.push(message(Role.SYSTEM, request.instructions));
  const items: ResponsesInputItem[] =
    typeof request.input === "string" ? [{ type: "message", role: "user", content: request.input }] : request.input;
  // Thinking sent back waits for the assistant turn it belongs to.
  let thinking = "";
  /** The assistant message that function_call items join: the last message, while it is the assistant's. */
  const assistantTurn = (): ChatMessage => {
    const last = messages.at(-1);
    if (last?.role === Role.ASSISTANT && thinking === "") return last;
    const turn = message(Role.ASSISTANT, "");
    messages.push(turn);
    return turn;
  };
  for (const item of items) {
    switch (item.type) {
      case "message":
        messages.push(create(ChatMessageSchema, { role: ROLES[item.role], content: messageTexts(item.content).map(textPart) }));
        break;
      case "function_call":
        assistantTurn().toolCalls.push(create(ToolCallSchema, { id: item.call_id, name: item.name, arguments: item.arguments || "{}" }));
        break;
      case "function_call_output":
        messages.push(
          create(ChatMessageSchema, { role: Role.TOOL, toolCallId: item.call_id, content: outputTexts(item.output).map(textPart) }),
        );
        break;
      case "reasoning":
        thinking += (thinking === "" ? "" : "\n\n") + reasoningText(item);
        continue;
      case "item_reference":
        // Refused by the schema.
        continue;
    }
    const last = messages.at(-1)!;
    if (last.role === Role.ASSISTANT && thinking !== "") last.reasoning = thinking;
    // Thinking is part of the assistant turn that follows it, never of a later one.
    thinking = "";
  }
  return messages;
}

function message(role: Role, text: string): ChatMessage {
  return create(ChatMessageSchema, { role, content: text === "" ? [] : [textPart(text)] });
}

function echoOf(request: ResponsesRequest): ResponseEcho {
  const choice = request.tool_choice;
  return {
    instructions: request.instructions ?? null,
    maxOutputTokens: request.max_output_tokens ?? null,
    format: request.text?.format ?? { type: "text" },
    toolChoice: choice ?? "auto",
    tools: (request.tools ?? []).map((tool) => ({
      type: "function",
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: typeof tool.strict === "boolean" ? tool.strict : true,
    })),
    metadata: request.metadata ?? {},
    effort: request.reasoning?.effort ?? null,
  };
}
