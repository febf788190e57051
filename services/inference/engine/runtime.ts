import type { Logger } from "../../../lib/logger.js";
import { DecisionShare } from "../score/decision-share.js";
import { fairRunner, type LaneRunner } from "../decoder/fair-runner.js";
import { createOrtRunner, type ForwardRunner, type KVShape, type OrtRunnerOptions } from "../decoder/forward.js";
import { KVStorePool } from "../decoder/kv-pool.js";
import type { UnmaskPolicy } from "../decoder/policies/policy.js";
import { DEFAULT_THRESHOLD } from "../decoder/policies/registry.js";
import { selectPolicy } from "../decoder/policies/select.js";
import type { DecodeModel } from "../decoder/sequence.js";
import { type EngineMetrics, recordTransfer } from "../core/metrics.js";
import type { ModelDir } from "./model-dir.js";
import { Scheduler } from "./scheduler.js";
import { DEFAULT_MAX_SCORE_ROW_TOKENS, DEFAULT_MAX_SCORE_WORK_TOKENS } from "../core/score-limits.js";

/**
 * Default of the most prompt tokens per prefill forward (TESSERA_PREFILL_CHUNK_TOKENS), on the
 * CPU and on a GPU. One forward over a long prompt computes every query against every key and
 * masks the later blocks away; chunks attend only to what is before them, at the price of a
 * forward's fixed cost and a copy of the cache so far each. On the CPU 512 measured best over
 * both models tried (bench/prefill.ts: the bundled model 0.69–0.81 of one forward at 1,024–1,920
 * tokens, SDAR-1.7B int8 0.87–0.92); a GPU, where the masked half costs little, keeps 2,048.
 */
export const DEFAULT_CPU_PREFILL_CHUNK = 512;
export const DEFAULT_DEVICE_PREFILL_CHUNK = 2048;

/**
 * One loaded mask model and what runs it: its directory, slots and step loop, the fair runner,
 * policies and decision limits. The engine (mask-engine.ts) is built over it; the service never
 * reaches in here. It may answer to several serving ids.
 */
export interface ModelRuntime {
  /** Label in metrics and messages (the model directory's name). */
  name: string;
  servingIds: string[];
  model: ModelDir;
  decode: DecodeModel;
  /** One forward at a time, shared fairly by generation and each Score request (fair-runner.ts). */
  runner: LaneRunner;
  scheduler: Scheduler;
  /** Decisions' slots, wait queue and lanes by client (score/decision-share.ts). */
  decisions: DecisionShare;
  /** The unmasking policy of this model's replies (of serving ids without their own). */
  policy: UnmaskPolicy;
  /** The unmasking policy of one serving id's replies. */
  policyFor(servingId: string): UnmaskPolicy;
  /**
   * The confidence threshold of the grammar's frontier rule (grammar/frontier-rule.ts): the
   * server's TESSERA_UNMASK_THRESHOLD, else 0.9.
   */
  threshold: number;
  /** Most tokens of model work one Score request may need (score.ts). */
  maxScoreWorkTokens: number;
  /** Most tokens of one forward of a Score request: the prefix and longer rows are prefilled in chunks of it (score.ts). */
  maxScoreRowTokens: number;
  /** Most prompt tokens per prefill forward, whole blocks: a generation's prompt, a decision's state (with maxScoreRowTokens). */
  prefillChunk: number;
  metrics: EngineMetrics | undefined;
  close(): Promise<void>;
}

export interface ModelRuntimeOptions {
  name: string;
  servingIds: string[];
  model: ModelDir;
  slots: number;
  queue: number;
  /**
   * Unmasking policy: a spec (policies/registry.ts) or a built policy. Unset: the server's
   * `serverPolicy`, else the model's config.json `decoding.policy`, else `threshold`.
   */
  policy?: string | UnmaskPolicy;
  /** Specs of serving ids that name their own policy (the models config's `unmask_policy`). */
  servingPolicies?: Readonly<Record<string, string>>;
  /** The server's policy setting (TESSERA_UNMASK_POLICY). */
  serverPolicy?: string;
  /** Confidence of `threshold` where the policy spec gives none (default: config.json's, else 0.9). */
  threshold?: number;
  /** Most tokens of model work one Score request may need; default DEFAULT_MAX_SCORE_WORK_TOKENS. */
  maxScoreWorkTokens?: number;
  /** Most tokens of one forward of a Score request; default DEFAULT_MAX_SCORE_ROW_TOKENS. */
  maxScoreRowTokens?: number;
  /** Most prompt tokens per prefill forward; unset or 0: DEFAULT_CPU_PREFILL_CHUNK on the CPU, else DEFAULT_DEVICE_PREFILL_CHUNK. */
  prefillChunk?: number;
  metrics?: EngineMetrics;
  logger?: Logger;
  /** Wraps the ONNX Runtime runner (tests count rows or inject failures here). */
  wrapRunner?: (runner: ForwardRunner) => ForwardRunner;
}

export function kvShapeOf(model: ModelDir): KVShape {
  return { layers: model.config.numLayers, heads: model.config.numKvHeads, headDim: model.config.headDim };
}

/** The model facts decoding needs; host caches share a pool of `keptStores` stores (kv-pool.ts). */
export function decodeModelOf(model: ModelDir, keptStores = 0): DecodeModel {
  const c = model.config;
  return {
    blockSize: c.blockSize,
    maxPositions: c.maxPositions,
    vocabSize: c.vocabSize,
    maskTokenId: c.maskTokenId,
    eosTokenId: c.eosTokenId,
    padTokenId: c.padTokenId,
    kvShape: kvShapeOf(model),
    stopTokenIds: c.stopTokenIds,
    logitsShift: c.logitsShift,
    ...(model.deviceKV !== undefined ? { deviceKV: model.deviceKV } : { hostPool: new KVStorePool(keptStores) }),
  };
}

export function createModelRuntime(options: ModelRuntimeOptions): ModelRuntime {
  if (options.threshold !== undefined && !(options.threshold >= 0)) throw new Error("threshold must be a number >= 0");
  // The grammar's frontier rule keeps the server's threshold (else 0.9): the model's
  // decoding.threshold is measured for its unmasking policy, not for constrained spans.
  const threshold = options.threshold ?? DEFAULT_THRESHOLD;
  const select = (catalog: string | undefined) =>
    selectPolicy({
      catalog,
      server: options.serverPolicy,
      serverThreshold: options.threshold,
      model: options.model.config.decoding,
    });
  const policy = typeof options.policy === "object" ? options.policy : select(options.policy);
  const own = new Map<string, UnmaskPolicy>();
  for (const [id, spec] of Object.entries(options.servingPolicies ?? {})) own.set(id, select(spec));
  const ortRunner = createOrtRunner(options.model.session, kvShapeOf(options.model), ortRunnerOptions(options));
  const runner = fairRunner(options.wrapRunner ? options.wrapRunner(ortRunner) : ortRunner);
  // As many idle stores as replies can run at once: a busy server reuses its caches' memory.
  const decode = decodeModelOf(options.model, options.slots);
  const prefillChunk =
    options.prefillChunk !== undefined && options.prefillChunk > 0
      ? options.prefillChunk
      : options.model.executionProviders[0] === "cpu"
        ? DEFAULT_CPU_PREFILL_CHUNK
        : DEFAULT_DEVICE_PREFILL_CHUNK;
  const scheduler = new Scheduler({
    name: options.name,
    model: decode,
    runner,
    slots: options.slots,
    queue: options.queue,
    prefillChunk,
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
    decisions: new DecisionShare(options.name, options.slots, options.queue),
    policy,
    policyFor: (servingId) => own.get(servingId) ?? policy,
    threshold,
    maxScoreWorkTokens: options.maxScoreWorkTokens ?? DEFAULT_MAX_SCORE_WORK_TOKENS,
    maxScoreRowTokens: options.maxScoreRowTokens ?? DEFAULT_MAX_SCORE_ROW_TOKENS,
    prefillChunk: scheduler.prefillChunk,
    metrics: options.metrics,
    close: async () => {
      await scheduler.close();
      decode.hostPool?.clear();
      await options.model.close();
    },
  };
}

/** Where the model's session runs, its device key/values, and the transfer and device memory metrics. */
function ortRunnerOptions(options: ModelRuntimeOptions): OrtRunnerOptions {
  const { model, metrics, name } = options;
  const provider = model.executionProviders[0] ?? "cpu";
  const deviceKV = model.deviceKV;
  if (deviceKV !== undefined && metrics !== undefined) deviceKV.onHeld = (bytes) => metrics.deviceKVBytes.set({ model: name }, bytes);
  return {
    provider,
    ...(deviceKV !== undefined ? { deviceKV } : {}),
    onTransfer: (t) => {
      if (metrics !== undefined) recordTransfer(metrics, name, t);
    },
  };
}
