import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import * as ort from "onnxruntime-node";
import { readSetting } from "../../../lib/config.js";
import type { Logger } from "../../../lib/logger.js";
import { sessionHostReady } from "./onnx-host-client.js";
import { WorkerSession } from "./onnx-worker-session.js";

export type ExecutionProvider = "cpu" | "cuda" | "webgpu";

/** Opens a weightless graph on the model's provider, its `out_*` outputs left on the device. */
export type OpenDeviceGraph = (model: Uint8Array, outputs: readonly string[]) => Promise<ort.InferenceSession>;

/** What the log and the error say when the WebGPU provider finds no adapter. */
export const WEBGPU_FIX =
  "install the GPU's Vulkan driver and the Vulkan loader (NVIDIA: the driver's nvidia_icd.json and libvulkan.so.1; " +
  "AMD and Intel: mesa-vulkan-drivers and libvulkan1), or, without a GPU, a software Vulkan: " +
  "VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json LD_LIBRARY_PATH=/usr/lib/chromium (Debian's chromium package); " +
  "TESSERA_GPU_FALLBACK=cpu runs on the CPU instead (services/inference/README.md, Execution providers)";

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
  /**
   * Outputs a WebGPU session leaves in device memory (`gpu-buffer`): the model's `present.*`,
   * which the engine keeps on the device as its key/value caches (decoder/device-kv.ts).
   */
  deviceOutputs?: readonly string[];
  /** Where a device provider cannot start: `cpu` opens the session on the CPU (with a warning), `none` fails. Default `none`. */
  fallback?: "cpu" | "none";
  /** The model's file, for messages (the model may be passed as edited bytes). */
  label?: string;
  logger?: Logger;
}

/** Whether sessions run on a worker thread unless told otherwise: `TESSERA_ORT_WORKER`, default on. */
export function ortWorkerDefault(env: NodeJS.ProcessEnv = process.env): boolean {
  return readSetting("engine", "ortWorker", env);
}

export interface OpenedSession {
  session: ort.InferenceSession;
  /** The providers the session was created with (after any fallback). */
  executionProviders: ExecutionProvider[];
  /** On WebGPU: opens the key/value graphs on the same device, their outputs left there. */
  openDeviceGraph?: OpenDeviceGraph;
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
 * Opens the ONNX model with the preferred execution providers. `webgpu` needs a Vulkan
 * adapter; `cuda` needs its provider libraries installed and a driver. Where the provider
 * cannot start the open fails with the cause and the fix, unless `fallback` is `cpu`: then
 * the session opens on the CPU and the log says why.
 */
export async function openSession(model: string | Uint8Array, options: SessionOptions = {}): Promise<OpenedSession> {
  const modelPath = options.label ?? (typeof model === "string" ? model : "(in memory)");
  const onWorker = options.worker ?? ortWorkerDefault();
  // The host's session must be the process's first for its workers to flush denormals (onnx-host.ts).
  if (onWorker || ortWorkerDefault()) await sessionHostReady();
  const create = (o: ort.InferenceSession.SessionOptions): Promise<ort.InferenceSession> =>
    onWorker
      ? WorkerSession.open(model, o)
      : typeof model === "string"
        ? ort.InferenceSession.create(model, o)
        : ort.InferenceSession.create(model, o);
  const wanted = [...new Set([...(options.executionProviders ?? ["cpu"]), "cpu" as const])];
  const base: ort.InferenceSession.SessionOptions = {
    graphOptimizationLevel: "all",
    ...(options.intraOpThreads !== undefined && options.intraOpThreads > 0 ? { intraOpNumThreads: options.intraOpThreads } : {}),
  };
  if (wanted[0] === "webgpu") {
    // A gpu-buffer tensor lives in the thread that made it, so the session, its key/value
    // graphs and the caches stay on the engine's thread (see services/inference/README.md).
    const onDevice = (names: readonly string[]) => Object.fromEntries(names.map((n) => [n, "gpu-buffer" as const]));
    const webgpu = { ...base, executionProviders: ["webgpu"] };
    try {
      const session =
        typeof model === "string"
          ? await ort.InferenceSession.create(model, { ...webgpu, preferredOutputLocation: onDevice(options.deviceOutputs ?? []) })
          : await ort.InferenceSession.create(model, { ...webgpu, preferredOutputLocation: onDevice(options.deviceOutputs ?? []) });
      const openDeviceGraph: OpenDeviceGraph = (graph, outputs) =>
        ort.InferenceSession.create(graph, { executionProviders: ["webgpu"], preferredOutputLocation: onDevice(outputs) });
      return { session, executionProviders: ["webgpu", "cpu"], openDeviceGraph };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const cause = /adapter/i.test(message)
        ? "no WebGPU adapter (no Vulkan driver found)"
        : "the WebGPU execution provider failed to start";
      if (options.fallback !== "cpu") {
        throw new Error(`${modelPath}: ${cause}: ${message}. Fix: ${WEBGPU_FIX}`, { cause: err });
      }
      options.logger?.warn({ err, modelPath, fix: WEBGPU_FIX }, `${cause}; using the CPU as TESSERA_GPU_FALLBACK=cpu allows`);
    }
  }
  if (wanted[0] === "cuda") {
    if (!cudaProviderInstalled() && options.fallback !== "cpu") {
      throw new Error(
        `${modelPath}: the CUDA execution provider's libraries are not installed; install them (services/inference/README.md, Execution providers) or set TESSERA_GPU_FALLBACK=cpu`,
      );
    }
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
        if (options.fallback !== "cpu")
          throw new Error(`${modelPath}: the CUDA execution provider failed to start: ${String(err)}`, { cause: err });
        options.logger?.warn({ err, modelPath }, "CUDA execution provider failed to start; using the CPU");
      }
    }
  }
  const session = await create({ ...base, executionProviders: ["cpu"] });
  return { session, executionProviders: ["cpu"] };
}
