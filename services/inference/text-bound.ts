import type { ChatInput } from "./chat-prompt.js";
import { PromptTooLong } from "./engine-errors.js";

/**
 * UTF-8 bytes of a conversation that every chat template renders: the text parts of the
 * messages and the assistant's tool calls. (Names, ids, earlier reasoning and tool definitions
 * are left out: a template may drop them.) Counting stops once past `enough`.
 */
export function chatTextBytes(input: ChatInput, enough = Number.POSITIVE_INFINITY): number {
  let bytes = 0;
  for (const message of input.messages) {
    for (const part of message.content) if (part.part.case === "text") bytes += Buffer.byteLength(part.part.value);
    for (const call of message.toolCalls) bytes += Buffer.byteLength(call.name) + Buffer.byteLength(call.arguments);
    if (bytes > enough) return bytes;
  }
  return bytes;
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
