import type { Logger } from "../../lib/logger.js";
import { createOrtRunner, serializeRunner, type ForwardRunner, type KVShape } from "./decoder/forward.js";
import { buildPolicy, DEFAULT_POLICY, DEFAULT_THRESHOLD } from "./decoder/policies/registry.js";
import type { UnmaskPolicy } from "./decoder/policies/policy.js";
import type { DecodeModel } from "./decoder/sequence.js";
import type { EngineMetrics } from "./metrics.js";
import type { ModelDir } from "./model-dir.js";
import { Scheduler } from "./scheduler.js";

export const DEFAULT_MAX_TOKENS = 1024;
export const MAX_TOKENS_CAP = 8192;

/** One loaded model with its slots and step loop; it may answer to several serving ids. */
export interface ModelEngine {
  /** Label in metrics and messages (the model directory's name). */
  name: string;
  servingIds: string[];
  model: ModelDir;
  decode: DecodeModel;
  /** Serialized: one forward at a time, shared by generation and Score. */
  runner: ForwardRunner;
  scheduler: Scheduler;
  /** The unmasking policy of this model's replies. */
  policy: UnmaskPolicy;
  /** The confidence threshold; also the one of the grammar's frontier rule (grammar/frontier-rule.ts). */
  threshold: number;
  metrics: EngineMetrics | undefined;
  close(): Promise<void>;
}

export interface ModelEngineOptions {
  name: string;
  servingIds: string[];
  model: ModelDir;
  slots: number;
  queue: number;
  /** Unmasking policy: a spec (policies/registry.ts) or a built policy. Default `threshold`. */
  policy?: string | UnmaskPolicy;
  /** Confidence of `threshold` where the policy spec gives none (default 0.9). */
  threshold?: number;
  prefillChunk?: number;
  metrics?: EngineMetrics;
  logger?: Logger;
  /** Wraps the ONNX Runtime runner (tests count rows or inject failures here). */
  wrapRunner?: (runner: ForwardRunner) => ForwardRunner;
}

export function kvShapeOf(model: ModelDir): KVShape {
  return { layers: model.config.numLayers, heads: model.config.numKvHeads, headDim: model.config.headDim };
}

export function decodeModelOf(model: ModelDir): DecodeModel {
  const c = model.config;
  return {
    blockSize: c.blockSize,
    maxPositions: c.maxPositions,
    vocabSize: c.vocabSize,
    maskTokenId: c.maskTokenId,
    eosTokenId: c.eosTokenId,
    padTokenId: c.padTokenId,
    kvShape: kvShapeOf(model),
  };
}

export function createModelEngine(options: ModelEngineOptions): ModelEngine {
  const threshold = options.threshold ?? DEFAULT_THRESHOLD;
  if (!(threshold >= 0)) throw new Error("threshold must be a number >= 0");
  const policy = typeof options.policy === "object" ? options.policy : buildPolicy(options.policy ?? DEFAULT_POLICY, { threshold });
  const ortRunner = createOrtRunner(options.model.session, kvShapeOf(options.model));
  const runner = serializeRunner(options.wrapRunner ? options.wrapRunner(ortRunner) : ortRunner);
  const decode = decodeModelOf(options.model);
  const scheduler = new Scheduler({
    name: options.name,
    model: decode,
    runner,
    slots: options.slots,
    queue: options.queue,
    ...(options.prefillChunk !== undefined ? { prefillChunk: options.prefillChunk } : {}),
    ...(options.metrics !== undefined ? { metrics: options.metrics } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
  });
  options.metrics?.slotsBusy.set({ model: options.name }, 0);
  return {
    name: options.name,
    servingIds: options.servingIds,
    model: options.model,
    decode,
    runner,
    scheduler,
    policy,
    threshold,
    metrics: options.metrics,
    close: async () => {
      await scheduler.close();
      await options.model.close();
    },
  };
}

/** max_tokens as the engine applies it: 0 means the default, then the cap, then the context. */
export function effectiveMaxTokens(requested: number, promptTokens: number, maxPositions: number): number {
  const wanted = requested > 0 ? Math.min(requested, MAX_TOKENS_CAP) : DEFAULT_MAX_TOKENS;
  return Math.min(wanted, maxPositions - promptTokens);
}
