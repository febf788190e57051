import { ApiError, errorFromBody } from "../api-error.js";
import { sseData } from "../sse.js";
import type { ToolCall } from "./chat-request.js";

/** The `denoising` object of a chunk (README, "Live denoising"). */
export interface DenoisingStep {
  block: number;
  step: number;
  block_size: number;
  reply_start: number;
  masked: number;
  committed: { position: number; token_id: number; text: string; forced: boolean }[];
  /** A canvas model's step: every position's draft token, accepted or renoised. */
  canvas?: { token_id: number; text: string; accepted: boolean }[];
  /** The canvas's last step: its draft is the canvas the reply takes. */
  canvas_final?: boolean;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** The reply as it builds up. */
export interface ReplyState {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  finishReason: string | null;
  usage: Usage | null;
}

export interface StreamHandlers {
  onStep(step: DenoisingStep): void;
  onReply(reply: ReplyState): void;
}

interface ChunkToolCall {
  index: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

interface Chunk {
  choices?: { delta?: { content?: string; reasoning?: string; tool_calls?: ChunkToolCall[] }; finish_reason?: string | null }[];
  usage?: Usage;
  denoising?: DenoisingStep;
  error?: unknown;
}

/**
 * Reads a chat completion stream to its end: denoising chunks to `onStep`, content, reasoning
 * and tool-call pieces into the reply. An error event throws the ApiError it carries.
 */
export async function readChatStream(body: ReadableStream<Uint8Array>, handlers: StreamHandlers): Promise<ReplyState> {
  const reply: ReplyState = { content: "", reasoning: "", toolCalls: [], finishReason: null, usage: null };
  const calls = new Map<number, ToolCall>();
  for await (const data of sseData(body)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error !== undefined) {
      const err = errorFromBody(200, chunk);
      throw new ApiError(err.status, err.type, err.message, { ...err.extra, inStream: true });
    }
    if (chunk.denoising !== undefined) {
      handlers.onStep(chunk.denoising);
      continue;
    }
    if (chunk.usage !== undefined) reply.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (choice === undefined) continue;
    const delta = choice.delta ?? {};
    reply.content += delta.content ?? "";
    reply.reasoning += delta.reasoning ?? "";
    for (const piece of delta.tool_calls ?? []) {
      let call = calls.get(piece.index);
      if (call === undefined) {
        call = { id: piece.id ?? "", type: "function", function: { name: "", arguments: "" } };
        calls.set(piece.index, call);
      }
      call.id ||= piece.id ?? "";
      call.function.name ||= piece.function?.name ?? "";
      call.function.arguments += piece.function?.arguments ?? "";
    }
    reply.toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
    if (choice.finish_reason) reply.finishReason = choice.finish_reason;
    handlers.onReply(reply);
  }
  handlers.onReply(reply);
  return reply;
}
