import { randomBytes } from "node:crypto";
import { FirstJsonObject } from "./reply-json.js";
import { TrimmedSink } from "./reply-sink.js";
import { DEFAULT_SPECIAL_TOKENS, type ChatSpecialTokens } from "../core/model-config.js";
import type { ReplyDelta } from "../core/model-engine.js";
import type { PromptEnding } from "../prompt/chat-prompt.js";
import { ThinkSplitter } from "./reply-think.js";
import { ToolCallExtractor } from "./reply-tool-calls.js";

/**
 * Turns the model's decoded reply text into the three things a chat completion carries:
 * visible `content`, `reasoning` (the thinking span) and OpenAI `tool_calls`.
 *
 * Text arrives in chunks (one per committed block) split anywhere, even inside a tag. The
 * parser passes text on as soon as it cannot be part of a tag and holds back only a tail that
 * might still become one, so any split of the same text gives the same concatenated result.
 *
 * The reply grammar is the one of docs/model-contract.md:
 * - thinking: the prompt ended in `<think>\n`, so text up to `</think>` is reasoning;
 * - tool calls: `<tool_call>{"name": "...", "arguments": {...}}</tool_call>`, or in the model's
 *   own call syntax where its config names one (`tool_call_format`, reply-tool-calls.ts: Gemma 4's
 *   `<|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>`, reply-gemma4.ts);
 * - forced tool: the prompt ended in `<tool_call>{"name": "<fn>", "arguments": `, so the reply
 *   continues inside the arguments and is always a call of that function.
 * The decoder must keep these tags when it decodes (they are special tokens) and trim the
 * end of turn itself.
 *
 * Three stages, one file each: reply-think.ts (thinking span → reasoning), reply-tool-calls.ts
 * (`<tool_call>` spans → tool calls), reply-json.ts (JSON modes: the first JSON object); then
 * reply-sink.ts trims whitespace around spans. reply-tags.ts scans for the tags.
 */

/** How the prompt ended (prompt/chat-prompt.ts), and what the parser itself takes. */
export interface ReplyParserOptions extends PromptEnding {
  /** Id generator for tool calls; default `call_` + 24 random alphanumerics. */
  newToolCallId?: () => string;
  /** The model's delimiters (its config's `special_tokens`); default `<think>`…, `<tool_call>`…. */
  tags?: ChatSpecialTokens;
}

export interface ReplyParser {
  push(text: string): ReplyDelta;
  finish(): ReplyDelta & { sawToolCall: boolean };
}

const REASONING_SEPARATOR = "\n\n";

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export function newToolCallId(): string {
  // 248 = 4 * 62: rejecting bytes above it keeps every character equally likely.
  let id = "call_";
  while (id.length < 29) {
    for (const byte of randomBytes(32)) {
      if (byte < 248 && id.length < 29) id += ALPHANUMERIC[byte % 62];
    }
  }
  return id;
}

export function createReplyParser(options: ReplyParserOptions): ReplyParser {
  let out: ReplyDelta = emptyDelta();
  let finished = false;

  const reasoning = new TrimmedSink((text) => (out.reasoning += text), REASONING_SEPARATOR);
  const content = new TrimmedSink((text) => (out.content += text), "");
  const json = options.jsonMode ? new FirstJsonObject((text) => content.write(text)) : null;
  const writeContent = (text: string): void => (json ? json.write(text) : content.write(text));

  const tags = options.tags ?? DEFAULT_SPECIAL_TOKENS;
  const calls = new ToolCallExtractor({
    enabled: options.toolCalls ?? true,
    tags: tags.toolCall,
    format: tags.toolCallFormat ?? "json",
    forcedTool: options.forcedTool,
    newId: options.newToolCallId ?? newToolCallId,
    onText: writeContent,
    onCall: (piece) => out.toolCalls.push(piece),
  });
  const think = new ThinkSplitter({
    inThink: options.thinking && options.forcedTool === undefined,
    tags: tags.thinking,
    onReasoning: (text) => reasoning.write(text),
    onReasoningEnd: () => reasoning.endSegment(),
    onBody: (text) => calls.write(text),
  });

  const take = (): ReplyDelta => {
    const delta = out;
    out = emptyDelta();
    return delta;
  };

  return {
    push(text: string): ReplyDelta {
      if (finished) throw new Error("reply parser: push after finish");
      calls.begin();
      think.write(text);
      return take();
    },
    finish() {
      if (finished) throw new Error("reply parser: finish called twice");
      finished = true;
      calls.begin();
      think.end();
      calls.end();
      json?.end();
      reasoning.end();
      content.end();
      return { ...take(), sawToolCall: calls.sawCall };
    },
  };
}

/**
 * The reply of a raw prompt (legacy completions): the text as the model wrote it, all content,
 * with no thinking span, tool calls or trimming.
 */
export function createRawReplyParser(): ReplyParser {
  let finished = false;
  return {
    push(text: string): ReplyDelta {
      if (finished) throw new Error("reply parser: push after finish");
      return { content: text, reasoning: "", toolCalls: [] };
    },
    finish() {
      if (finished) throw new Error("reply parser: finish called twice");
      finished = true;
      return { ...emptyDelta(), sawToolCall: false };
    },
  };
}

/** Two parser outputs as one; pieces of the same tool call are joined. */
export function mergeDeltas(a: ReplyDelta, b: ReplyDelta): ReplyDelta {
  const toolCalls = a.toolCalls.map((c) => ({ ...c }));
  for (const piece of b.toolCalls) {
    const same = toolCalls.find((c) => c.index === piece.index);
    if (same === undefined) {
      toolCalls.push({ ...piece });
    } else {
      same.arguments += piece.arguments;
      if (same.id === undefined && piece.id !== undefined) same.id = piece.id;
      if (same.name === undefined && piece.name !== undefined) same.name = piece.name;
    }
  }
  return { content: a.content + b.content, reasoning: a.reasoning + b.reasoning, toolCalls };
}

function emptyDelta(): ReplyDelta {
  return { content: "", reasoning: "", toolCalls: [] };
}
