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
  const { grammar } = config;
  const pool = await loadModelPool({
    models,
    ...config.limits,
    ...config.engine,
    ...config.decoding,
    imageLimits: config.images,
    grammar: {
      cacheSize: grammar.cacheSize,
      compileBudgetMs: grammar.compileBudgetMs,
      workers: grammar.workers,
      numberBounds: grammar.numberBounds,
      finish: {
        loopRepeats: grammar.loopRepeats,
        stringBudget: grammar.stringBudget,
        itemBudget: grammar.itemBudget,
        freeText: grammar.freeText,
        replyBudget: grammar.replyBudget,
      },
    },
    logger: inferenceLogger,
    metrics: metrics.registry,
  });
  return { pool, routes: inferenceRoutes({ pool, workerId: config.cluster.workerId }) };
}
