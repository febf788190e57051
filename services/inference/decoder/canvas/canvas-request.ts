// What a CanvasDecoder (canvas-decoder.ts) is asked and answers: one row's request, its random
// draws, the events it streams and its result.
import type { GrammarReport } from "../../grammar/sequence-grammar.js";
import type { CommittedLogprob } from "../logprobs.js";
import type { CanvasConstraint } from "./canvas-frontier.js";
import { noiseTokens, seededRandom } from "./sampler.js";

/** The random draws of one row, in the order transformers' generate makes them. */
export interface CanvasDraws {
  noise(length: number, vocab: number): Int32Array;
  uniforms(length: number): Float64Array;
}

export function seededDraws(seed: number): CanvasDraws {
  const random = seededRandom(seed);
  return {
    noise: (length, vocab) => noiseTokens(length, vocab, random),
    uniforms: (length) => Float64Array.from({ length }, random),
  };
}

/** One denoising step of one row, as streamed: the draft is this step's argmax canvas. */
export interface CanvasStepEvent {
  canvasIndex: number;
  /** The row's denoiser step, from 1 over all its canvases. */
  step: number;
  /** The step within this canvas, from 1. */
  canvasStep: number;
  draft: readonly number[];
  /** Per position: the sampler accepted its sample (true) or renoised it (false). */
  acceptedMask: readonly boolean[];
  accepted: number;
  /** This step ended the canvas (stable and confident, or out of steps): its draft is the canvas's reply. */
  last: boolean;
  /** Under a grammar: the canvas's committed prefix after this step (the frontier); absent when free. */
  committed?: number;
}

/** A finished canvas as the reply takes it: its tokens (cut at the stop token and maxTokens). */
export interface FinishedCanvas {
  tokens: readonly number[];
  canvasIndex: number;
  /** With CanvasRequest.logprobs: one entry per token, read from the logits of the canvas's last step. */
  logprobs?: CommittedLogprob[];
}

/** A prompt's images: vision.onnx's rows, in prompt order, and where each image's tokens are. */
export interface PromptImages {
  /** `[tokens, hidden]` float32: one row per image_token_id position of the prompt, in order. */
  embeds: Float32Array;
  /** Per image, the [start, end) prompt indices of its image tokens (they see each other both ways). */
  blocks: readonly (readonly [number, number])[];
}

export interface CanvasRequest {
  promptIds: readonly number[];
  images?: PromptImages;
  maxTokens: number;
  draws: CanvasDraws;
  signal?: AbortSignal;
  onStep?: (e: CanvasStepEvent) => void;
  /**
   * A finished canvas, appended to the reply. Returning true ends the reply there with
   * finish reason "stop" (a stop sequence appeared in its text): no further canvas is denoised.
   */
  onCanvas?: (canvas: FinishedCanvas) => boolean | undefined;
  /**
   * Under a grammar: tokens committed at the frontier, as each step commits them (they are
   * final, so they can stream before their canvas ends). With it, `onCanvas` gets only the
   * canvas's tokens not already given here.
   */
  onCommitted?: (piece: { tokens: readonly number[]; canvasIndex: number }) => void;
  /**
   * Each reply token's log-probability and `top` alternatives, under the softmax of the raw
   * logits (before the step's temperature) of the step whose argmax gave the token: the
   * canvas's last step (docs/decoding.md, "Logprobs on a canvas").
   */
  logprobs?: { top: number };
  /** The reply's grammar (canvas-frontier.ts); absent: free text. */
  constraint?: CanvasConstraint;
}

export interface CanvasResult {
  tokens: number[];
  finishReason: "stop" | "length";
  /** Denoiser steps this row took, over all its canvases. */
  steps: number;
  canvases: number;
  /** Generated tokens (the stop token included, as transformers counts them) per denoiser step. */
  tokensPerStep: number;
  /** What the reply's grammar did, when one decoded part of it. */
  grammar?: GrammarReport;
}
