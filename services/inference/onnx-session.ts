import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import * as ort from "onnxruntime-node";
import type { Logger } from "../../lib/logger.js";
import { WorkerSession } from "./onnx-worker-session.js";

export type ExecutionProvider = "cpu" | "cuda";

export interface SessionOptions {
  /** In order of preference; `cpu` is always tried last. Default `["cpu"]`. */
  executionProviders?: readonly ExecutionProvider[];
  /** ONNX Runtime intra-op threads; 0 lets ONNX Runtime decide. */
  intraOpThreads?: number;
  /**
   * Runs the session on a worker thread (onnx-worker-session.ts), so a forward does not block
   * the event loop. Default: on, unless the environment sets `TESSERA_ORT_WORKER=0`.
   */
  worker?: boolean;
  logger?: Logger;
}

/** Whether sessions run on a worker thread unless told otherwise: `TESSERA_ORT_WORKER`, default on. */
export function ortWorkerDefault(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.TESSERA_ORT_WORKER?.trim().toLowerCase();
  return !(v === "0" || v === "false" || v === "off" || v === "no");
}

export interface OpenedSession {
  session: ort.InferenceSession;
  /** The providers the session was created with (after any fallback). */
  executionProviders: ExecutionProvider[];
}

/**
 * Whether the CUDA execution provider's libraries are installed next to onnxruntime-node's
 * binding (they are not bundled in the npm package; see services/inference/README.md).
 */
export function cudaProviderInstalled(): boolean {
  const require = createRequire(import.meta.url);
  const pkg = path.dirname(require.resolve("onnxruntime-node/package.json"));
  const dir = path.join(pkg, "bin", "napi-v6", process.platform, process.arch);
  return existsSync(path.join(dir, "libonnxruntime_providers_cuda.so"));
}

/**
 * Opens the ONNX model with the preferred execution providers. `cuda` is used only where
 * its provider libraries are installed; otherwise, or when ONNX Runtime cannot start it
 * (no driver, wrong CUDA/cuDNN), the session falls back to the CPU and says so in the log.
 */
export async function openSession(model: string | Uint8Array, options: SessionOptions = {}): Promise<OpenedSession> {
  const modelPath = typeof model === "string" ? model : "(in memory)";
  const create = (o: ort.InferenceSession.SessionOptions): Promise<ort.InferenceSession> =>
    (options.worker ?? ortWorkerDefault())
      ? WorkerSession.open(model, o)
      : typeof model === "string"
        ? ort.InferenceSession.create(model, o)
        : ort.InferenceSession.create(model, o);
  const wanted = [...new Set([...(options.executionProviders ?? ["cpu"]), "cpu" as const])];
  const base: ort.InferenceSession.SessionOptions = {
    graphOptimizationLevel: "all",
    ...(options.intraOpThreads !== undefined && options.intraOpThreads > 0 ? { intraOpNumThreads: options.intraOpThreads } : {}),
  };
  if (wanted[0] === "cuda") {
    if (!cudaProviderInstalled()) {
      options.logger?.warn(
        { modelPath },
        "CUDA execution provider requested but its libraries are not installed; using the CPU (see services/inference/README.md)",
      );
    } else {
      try {
        const session = await create({ ...base, executionProviders: ["cuda", "cpu"] });
        return { session, executionProviders: ["cuda", "cpu"] };
      } catch (err) {
        options.logger?.warn({ err, modelPath }, "CUDA execution provider failed to start; using the CPU");
      }
    }
  }
  const session = await create({ ...base, executionProviders: ["cpu"] });
  return { session, executionProviders: ["cpu"] };
}
