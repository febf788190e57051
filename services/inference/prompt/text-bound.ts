import { ToolChoiceMode } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { ChatInput } from "./chat-prompt.js";
import { PromptTooLong } from "../core/engine-errors.js";

/**
 * UTF-8 bytes of what a chat template renders of a request: the text parts of the messages
 * (the system text among them), the assistant's tool calls, and — when the tools are shown
 * (tool_choice is not "none") — each tool's name, description and parameters as JSON, and a
 * response_format's JSON schema as JSON. (Names, ids and earlier reasoning are left out: a
 * template may drop them.) Counting stops once past `enough`, and a JSON text is only
 * measured when what comes before it is under `enough`.
 */
export function chatTextBytes(input: ChatInput, enough = Number.POSITIVE_INFINITY): number {
  let bytes = 0;
  for (const message of input.messages) {
    for (const part of message.content) if (part.part.case === "text") bytes += Buffer.byteLength(part.part.value);
    for (const call of message.toolCalls) bytes += Buffer.byteLength(call.name) + Buffer.byteLength(call.arguments);
    if (bytes > enough) return bytes;
  }
  const choice = input.options?.toolChoice?.choice;
  const toolsShown = !(choice?.case === "mode" && choice.value === ToolChoiceMode.NONE);
  for (const tool of toolsShown ? input.tools : []) {
    bytes += Buffer.byteLength(tool.name) + Buffer.byteLength(tool.description);
    if (bytes > enough) return bytes;
    if (tool.parameters !== undefined) bytes += jsonBytes(tool.parameters);
    if (bytes > enough) return bytes;
  }
  const schema = input.options?.responseFormat?.jsonSchema?.schema;
  if (schema !== undefined && schema !== null) bytes += jsonBytes(schema);
  return bytes;
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? "");
}

/** The fewest tokens `bytes` of text can be, for a tokenizer whose tokens stand for at most `maxTokenBytes` bytes each. */
export function fewestTokens(bytes: number, maxTokenBytes: number): number {
  return Math.ceil(bytes / Math.max(1, maxTokenBytes));
}

/**
 * Refuses, before any rendering or tokenizing, a text that cannot fit the model's context
 * whatever its tokens: at least `bytes / maxTokenBytes` tokens, and the context holds
 * `context`. A few microseconds for a body the tokenizer would spend seconds of CPU on.
 */
export function refuseIfCannotFit(what: string, bytes: number, maxTokenBytes: number, context: number, model: string): void {
  const least = fewestTokens(bytes, maxTokenBytes);
  if (least >= context) {
    throw new PromptTooLong(
      `prompt too long: ${what} has ${bytes} bytes of text, at least ${least} tokens (at most ${maxTokenBytes} bytes per token), ` +
        `the context of model "${model}" is ${context} tokens`,
    );
  }
}
