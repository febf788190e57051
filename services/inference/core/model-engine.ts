import type { JsonObject } from "@bufbuild/protobuf";
import type {
  CountTokensRequest,
  GenerateRequest,
  GenerateStep,
  PromptToken,
  TokenLogprob,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { ModelCapabilities } from "./model-config.js";

/**
 * One served model as the service sees it: a mask model (mask-engine.ts, over a ModelRuntime)
 * or a canvas model (canvas/canvas-engine.ts). The service maps its RPCs onto these calls and
 * back; what differs between the kinds (prompts, decoding, what each refuses) stays behind them.
 */
export interface ModelEngine {
  /** Label in metrics and messages (the model directory's name). */
  readonly name: string;
  readonly servingIds: readonly string[];
  info(): ModelInfo;
  /** Tokens of a rendered conversation, of a plain text, or of a raw prompt (with Generate's checks). */
  countTokens(request: CountRequest): Promise<number>;
  /**
   * One reply: `started` once admitted, then steps and chunks, then `finished`. Refusals throw
   * (engine-errors.ts) before `started`. Ending the iteration early ends the reply.
   */
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<ReplyEvent>;
  /** One prefix, many suffixes → the labels' logits at each suffix's answer slot (score.ts). */
  score(request: ScoreRequest, signal: AbortSignal): Promise<ScoreOutput>;
  /** Refuses new work, cancels what is running, releases the sessions. */
  close(): Promise<void>;
}

/** What a Generate request asks of an engine (the request's fields the engine reads). */
export type GenerationRequest = Pick<GenerateRequest, "model" | "requestId" | "messages" | "tools" | "options" | "rawPrompt">;

/** What CountTokens asks: messages (a conversation), else `text`, or a raw prompt. */
export type CountRequest = Pick<CountTokensRequest, "model" | "messages" | "tools" | "options" | "rawPrompt" | "text">;

/** A Score request: the readout's input, and the serving id asked for (named in refusals). */
export type ScoreRequest = ScoreInput & { model: string };

export type FinishReason = "stop" | "length" | "tool_calls";

/** A piece of the reply: what the reply parser made of a committed block (or canvas). */
export interface ReplyChunk extends ReplyDelta {
  blockIndex: number;
  /** Reply tokens so far. */
  completionTokens: number;
  logprobs: TokenLogprob[];
}

export type ReplyEvent =
  | { type: "started"; promptTokens: number; tokenizedPrompt: PromptToken[] }
  | { type: "step"; step: GenerateStep }
  | { type: "chunk"; chunk: ReplyChunk }
  | { type: "finished"; reason: FinishReason; promptTokens: number; completionTokens: number; forwardPasses: number };

export interface ModelInfo {
  maxPositions: number;
  /** Tokens a step denoises: the block (mask models) or the canvas (canvas models). */
  blockSize: number;
  capabilities: ModelCapabilities;
  /** decision.json, where the model directory has one. */
  decision?: JsonObject;
  slots: { total: number; free: number };
}

/** A piece of one tool call in a ReplyDelta. */
export interface ToolCallPiece {
  /** Position of the call in the reply's tool_calls. */
  index: number;
  /** Set on the first piece of a call. */
  id?: string;
  /** Set on the first piece of a call. */
  name?: string;
  /** The next piece of the call's arguments (a JSON string once all pieces are joined). */
  arguments: string;
}

/** A piece of the reply as the reply parser (reply/reply-parser.ts) makes it: content, reasoning, tool calls. */
export interface ReplyDelta {
  content: string;
  reasoning: string;
  toolCalls: ToolCallPiece[];
}

/** What Score reads (score/score.ts, canvas/canvas-score.ts). */
export interface ScoreInput {
  prefix: string;
  suffixes: readonly { text: string; labels: readonly string[] }[];
  /** Only the token counts (no logits), after every check and the tokenizing; no model runs. */
  countOnly?: boolean;
  /** Whose decision this is (the gateway's account id): the decisions of one client share a lane (score/decision-share.ts). */
  client?: string;
}

export interface SuffixResult {
  /**
   * One value per label: the raw logit at the answer slot when every label of the suffix is
   * a single token, otherwise the label's log-probability (sum over its tokens).
   */
  logits: number[];
  /** Tokens of the suffix, the answer slot included. */
  suffixTokens: number;
}

export interface ScoreOutput {
  results: SuffixResult[];
  prefixTokens: number;
  /** The prefix once plus every suffix (answer slot included). */
  inputTokens: number;
}
