import { existsSync } from "node:fs";
import type { Config } from "../lib/config.js";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import type { ServiceMount } from "../lib/service-mount.js";
import type { ModelPool } from "../services/inference/engine/model-pool.js";
import type { Catalog } from "../services/registry/catalog.js";

/** The model directories of the catalog that exist; the others are named in a warning. */
export function servedModels(catalog: Catalog, logger: Logger): ReturnType<Catalog["servedModels"]> {
  return catalog.servedModels().filter(({ servingId, dir }) => {
    if (existsSync(dir)) return true;
    logger.warn({ servingId, dir }, "model directory not found; its models are not served (the listing leaves them out)");
    return false;
  });
}

export interface InferenceWorker {
  pool: ModelPool;
  /** The inference service over the pool (services/inference/server.ts). */
  routes: ServiceMount;
}

/**
 * Loads the model pool of one inference worker and the inference service over it. ONNX
 * Runtime is a large native library, so it is imported only when there is a model to serve.
 */
export async function startInferenceWorker(
  models: ReturnType<Catalog["servedModels"]>,
  config: Config,
  logger: Logger,
  metrics: Metrics,
): Promise<InferenceWorker> {
  const { loadModelPool } = await import("../services/inference/engine/model-pool.js");
  const { inferenceRoutes } = await import("../services/inference/server.js");
  const inferenceLogger = logger.child({ service: "inference" });
  const pool = await loadModelPool({
    models,
    slots: config.slots,
    queue: config.queue,
    imageLimits: { maxImages: config.maxImages, maxPixels: config.maxImagePixels, maxBytes: config.maxImageBytes },
    maxScoreWorkTokens: config.maxDecisionWorkTokens,
    maxScoreRowTokens: config.maxDecisionRowTokens,
    prefillChunk: config.prefillChunkTokens,
    intraOpThreads: config.intraOpThreads,
    executionProviders: config.executionProviders,
    gpuFallback: config.gpuFallback,
    ortWorker: config.ortWorker,
    threshold: config.unmaskThreshold,
    unmaskPolicy: config.unmaskPolicy,
    grammar: {
      cacheSize: config.grammarCacheSize,
      compileBudgetMs: config.grammarCompileBudgetMs,
      workers: config.grammarWorkers,
      numberBounds: config.grammarNumberBounds,
      finish: {
        loopRepeats: config.grammarLoopRepeats,
        stringBudget: config.grammarStringBudget,
        itemBudget: config.grammarItemBudget,
        freeText: config.grammarFreeTextGuard,
        replyBudget: config.grammarReplyBudget,
      },
    },
    logger: inferenceLogger,
    metrics: metrics.registry,
  });
  return { pool, routes: inferenceRoutes({ pool, workerId: config.workerId }) };
}
