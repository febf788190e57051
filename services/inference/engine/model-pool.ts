import path from "node:path";
import type { Registry } from "prom-client";
import type { Logger } from "../../../lib/logger.js";
import type { ForwardRunner } from "../decoder/forward.js";
import type { CanvasImageLimits } from "../canvas/canvas-images.js";
import { canvasModelEngine } from "../canvas/canvas-engine.js";
import { isCanvasModelDir, loadCanvasEngine } from "../canvas/canvas-service.js";
import { DEFAULT_GRAMMAR_WORKERS } from "../grammar/grammar-client.js";
import { DEFAULT_GRAMMAR_OPTIONS, type GrammarOptions } from "../grammar/model-grammars.js";
import type { ExecutionProvider } from "../onnx/onnx-session.js";
import type { ModelEngine } from "../core/model-engine.js";
import { createMaskEngine } from "./mask-engine.js";
import { engineMetrics } from "../core/metrics.js";
import { loadModelDir } from "./model-dir.js";
import { closeWhenIdle } from "./retire-engine.js";
import { createModelRuntime, type ModelRuntime } from "./runtime.js";

export interface ModelPoolOptions {
  /** Serving ids and their model directories; ids that share a directory share one engine. */
  models: readonly {
    servingId: string;
    dir: string;
    unmaskPolicy?: string | undefined;
    /** The models config entry's `execution_providers`, over the server's. */
    executionProviders?: readonly ExecutionProvider[] | undefined;
  }[];
  /** Generation slots per loaded model. */
  slots: number;
  /** Wait queue per loaded model; a request finding slots and queue full is refused. */
  queue: number;
  intraOpThreads?: number;
  executionProviders?: readonly ExecutionProvider[];
  /** Where a GPU provider cannot start: `cpu` runs on the CPU instead (TESSERA_GPU_FALLBACK); default: the load fails. */
  gpuFallback?: "cpu" | "none";
  /** Run ONNX Runtime on a worker thread (see onnx-session.ts). */
  ortWorker?: boolean;
  /** Confidence of the `threshold` rule where a policy spec gives none (default: the model's, else 0.9). */
  threshold?: number | undefined;
  /** The server's unmasking policy (default: each model's config.json `decoding.policy`, else `threshold`). */
  unmaskPolicy?: string | undefined;
  /** Most prompt tokens per prefill forward (TESSERA_PREFILL_CHUNK_TOKENS; unset or 0: 512 on the CPU, 2048 on a GPU). */
  prefillChunk?: number;
  /** Images per request, pixels and bytes per image, for models with vision (TESSERA_MAX_IMAGE*). */
  imageLimits?: CanvasImageLimits;
  /** Most tokens of model work one Score request may need (TESSERA_MAX_DECISION_WORK_TOKENS). */
  maxScoreWorkTokens?: number;
  /** Most tokens of one forward of a Score request (TESSERA_MAX_DECISION_ROW_TOKENS). */
  maxScoreRowTokens?: number;
  /** Grammar-constrained decoding: compiled-grammar cache, compile budget, compile threads, number bounds, loop guard and budgets. */
  grammar?: Partial<GrammarOptions> & { workers?: number };
  logger?: Logger;
  metrics?: Registry;
  /** Wraps each model's runner (tests: count rows, inject failures). */
  wrapRunner?: (runner: ForwardRunner, engineName: string) => ForwardRunner;
}

/** The models one inference worker serves. */
export interface ModelPool {
  readonly servingIds: string[];
  readonly slotsTotal: number;
  slotsFree(): number;
  /** The engine serving this id (a mask or a canvas model), or undefined: what the service calls. */
  engine(servingId: string): ModelEngine | undefined;
  /** The runtime of the mask model serving this id, or undefined: its parts, for tests, benchmarks and calibration. */
  runtime(servingId: string): ModelRuntime | undefined;
  /** The loaded mask models. */
  readonly runtimes: readonly ModelRuntime[];
  /** Loads more models into the running pool (a model pulled while serving); their ids are served once all loaded. */
  add(models: ModelPoolOptions["models"]): Promise<void>;
  /**
   * Loads these models and serves their ids from them instead of the engines serving them now
   * (a model pulled again at a new revision); an engine left serving no id finishes its running
   * work, then closes.
   */
  replace(models: ModelPoolOptions["models"]): Promise<void>;
  /** Stops serving these ids (a model removed while serving); an engine left serving none finishes its running work, then closes. */
  remove(servingIds: readonly string[]): void;
  /** Refuses new work, cancels what is running, releases the sessions. */
  close(): Promise<void>;
}

export async function loadModelPool(options: ModelPoolOptions): Promise<ModelPool> {
  if (options.models.length === 0) throw new Error("no models to serve");
  const metrics = options.metrics !== undefined ? engineMetrics(options.metrics) : undefined;
  const grammar = { ...DEFAULT_GRAMMAR_OPTIONS, workers: DEFAULT_GRAMMAR_WORKERS, ...options.grammar };

  const engines: ModelEngine[] = [];
  const runtimes: ModelRuntime[] = [];
  const byId = new Map<string, ModelEngine>();
  const runtimeById = new Map<string, ModelRuntime>();
  const names = new Set<string>();
  const runtimeOf = new Map<ModelEngine, ModelRuntime>();
  /** Engines no id routes to, finishing their running work → whether they closed (false: left to the pool's close). */
  const retiring = new Map<ModelEngine, Promise<boolean>>();
  let closed = false;

  /** Closes the engines of `candidates` that no serving id routes to any more, once their running work is done. */
  const retireUnrouted = (candidates: Iterable<ModelEngine>) => {
    const routed = new Set(byId.values());
    for (const engine of candidates) {
      if (routed.has(engine) || !engines.includes(engine)) continue;
      engines.splice(engines.indexOf(engine), 1);
      const runtime = runtimeOf.get(engine);
      if (runtime !== undefined) runtimes.splice(runtimes.indexOf(runtime), 1);
      runtimeOf.delete(engine);
      const done = closeWhenIdle(engine, () => closed).catch((err: unknown) => {
        options.logger?.error({ err, model: engine.name }, "closing a retired model failed");
        return true;
      });
      retiring.set(engine, done);
      void done.then(() => retiring.delete(engine));
    }
  };

  /** Loads the models' directories (one engine per directory); serves them only once all loaded. */
  const load = async (models: ModelPoolOptions["models"], replacing = false) => {
    const byDir = new Map<string, string[]>();
    const servingPolicies: Record<string, string> = {};
    const providersOfDir = new Map<string, readonly ExecutionProvider[]>();
    for (const { servingId, dir, unmaskPolicy, executionProviders } of models) {
      if (!replacing && byId.has(servingId)) throw new Error(`serving id "${servingId}" is configured twice`);
      const key = path.resolve(dir);
      if (executionProviders !== undefined && !providersOfDir.has(key)) providersOfDir.set(key, executionProviders);
      byDir.set(key, [...(byDir.get(key) ?? []), servingId]);
      if (unmaskPolicy !== undefined) servingPolicies[servingId] = unmaskPolicy;
    }
    const loaded: { engine: ModelEngine; runtime?: ModelRuntime }[] = [];
    try {
      for (const [dir, servingIds] of byDir) {
        let name = path.basename(dir);
        for (let n = 2; names.has(name); n++) name = `${path.basename(dir)}-${n}`;
        const policies = Object.fromEntries(servingIds.filter((id) => id in servingPolicies).map((id) => [id, servingPolicies[id]!]));
        loaded.push(await loadEngine(dir, name, servingIds, providersOfDir.get(dir) ?? options.executionProviders, policies));
        names.add(name);
      }
    } catch (err) {
      await Promise.all(loaded.map(({ engine }) => engine.close()));
      throw err;
    }
    const replaced = new Set<ModelEngine>();
    for (const { engine, runtime } of loaded) {
      engines.push(engine);
      if (runtime !== undefined) {
        runtimes.push(runtime);
        runtimeOf.set(engine, runtime);
      }
      for (const id of engine.servingIds) {
        const before = byId.get(id);
        if (before !== undefined && !replacing) throw new Error(`serving id "${id}" is configured twice`);
        if (before !== undefined) replaced.add(before);
        byId.set(id, engine);
        if (runtime !== undefined) runtimeById.set(id, runtime);
        else runtimeById.delete(id);
      }
    }
    retireUnrouted(replaced);
  };

  const loadEngine = async (
    dir: string,
    name: string,
    servingIds: string[],
    providers: readonly ExecutionProvider[] | undefined,
    servingPolicies: Record<string, string>,
  ): Promise<{ engine: ModelEngine; runtime?: ModelRuntime }> => {
    const started = performance.now();
    if (isCanvasModelDir(dir)) {
      const canvas = await loadCanvasEngine(dir, name, servingIds, {
        slots: options.slots,
        queue: options.queue,
        ...(options.imageLimits !== undefined ? { imageLimits: options.imageLimits } : {}),
        intraOpThreads: options.intraOpThreads,
        metrics,
        maxScoreWorkTokens: options.maxScoreWorkTokens,
        maxScoreRowTokens: options.maxScoreRowTokens,
        grammar,
        providers: {
          ...(providers !== undefined ? { executionProviders: providers } : {}),
          ...(options.gpuFallback !== undefined ? { fallback: options.gpuFallback } : {}),
          ...(options.logger !== undefined ? { logger: options.logger } : {}),
        },
      });
      options.logger?.info(
        {
          model: name,
          servingIds,
          dir,
          decoding: "canvas",
          executionProviders: canvas.model.executionProviders,
          loadMs: Math.round(performance.now() - started),
        },
        "model loaded",
      );
      return { engine: canvasModelEngine(canvas) };
    }
    const model = await loadModelDir(dir, {
      ...(providers !== undefined ? { executionProviders: providers } : {}),
      ...(options.gpuFallback !== undefined ? { fallback: options.gpuFallback } : {}),
      ...(options.intraOpThreads !== undefined ? { intraOpThreads: options.intraOpThreads } : {}),
      ...(options.ortWorker !== undefined ? { worker: options.ortWorker } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
    const wrap = options.wrapRunner;
    const runtime = createModelRuntime({
      name,
      servingIds,
      model,
      slots: options.slots,
      queue: options.queue,
      ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
      ...(options.unmaskPolicy !== undefined ? { serverPolicy: options.unmaskPolicy } : {}),
      servingPolicies,
      ...(options.prefillChunk !== undefined ? { prefillChunk: options.prefillChunk } : {}),
      ...(options.maxScoreWorkTokens !== undefined ? { maxScoreWorkTokens: options.maxScoreWorkTokens } : {}),
      ...(options.maxScoreRowTokens !== undefined ? { maxScoreRowTokens: options.maxScoreRowTokens } : {}),
      ...(metrics !== undefined ? { metrics } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
      ...(wrap !== undefined ? { wrapRunner: (r: ForwardRunner) => wrap(r, name) } : {}),
    });
    options.logger?.info(
      { model: name, servingIds, dir, executionProviders: model.executionProviders, loadMs: Math.round(performance.now() - started) },
      "model loaded",
    );
    return { engine: createMaskEngine(runtime, { grammar, logger: options.logger }), runtime };
  };

  await load(options.models);
  // One change at a time: two would pick names and check serving ids against the same state.
  let changing: Promise<void> = Promise.resolve();
  const change = (work: () => Promise<void>) => {
    const next = changing.then(work);
    changing = next.catch(() => {});
    return next;
  };

  return {
    get servingIds() {
      return [...byId.keys()];
    },
    get slotsTotal() {
      return engines.reduce((sum, e) => sum + e.info().slots.total, 0);
    },
    slotsFree: () => engines.reduce((sum, e) => sum + e.info().slots.free, 0),
    engine: (id) => byId.get(id),
    runtime: (id) => runtimeById.get(id),
    runtimes,
    add: (models) => change(() => load(models)),
    replace: (models) => change(() => load(models, true)),
    remove: (servingIds) => {
      const before = servingIds.map((id) => byId.get(id)).filter((e): e is ModelEngine => e !== undefined);
      for (const id of servingIds) {
        byId.delete(id);
        runtimeById.delete(id);
      }
      retireUnrouted(before);
    },
    close: async () => {
      await changing;
      closed = true;
      await Promise.all([
        ...engines.map((e) => e.close()),
        ...[...retiring].map(async ([engine, done]) => {
          if (!(await done)) await engine.close();
        }),
      ]);
    },
  };
}
