import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import type { Logger } from "../../lib/logger.js";
import { WORKER_MARK, type OpenedReply, type WireTensor, type WorkerReply, type WorkerRequest } from "./onnx-worker.js";

export type ExecutionProvider = "cpu" | "cuda";

export interface SessionOptions {
  /** In order of preference; `cpu` is always tried last. Default `["cpu"]`. */
  executionProviders?: readonly ExecutionProvider[];
  /** ONNX Runtime intra-op threads; 0 lets ONNX Runtime decide. */
  intraOpThreads?: number;
  /**
   * Runs the session on a worker thread (onnx-worker.ts), so a forward does not block the
   * event loop. Default: on, unless the environment sets `TESSERA_ORT_WORKER=0`.
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
    ...(options.intraOpThreads !== undefined && options.intraOpThreads > 0
      ? { intraOpNumThreads: options.intraOpThreads }
      : {}),
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

/**
 * Starts the worker: the built file, or under tsx or vitest the TypeScript source through
 * tsx (Node 20 does not apply a worker's `--import tsx` hooks to its entry point, so a small
 * bootstrap registers tsx's ESM hooks and then imports the source).
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith(".ts")) return new Worker(new URL("./onnx-worker.js", import.meta.url), { workerData: WORKER_MARK });
  const entry = new URL("./onnx-worker.ts", import.meta.url).href;
  const bootstrap = `import(${JSON.stringify(tsxEsmApi())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData: WORKER_MARK, execArgv: [] });
}

/** The file URL of tsx's `tsx/esm/api` (ESM build), from its package's exports. */
function tsxEsmApi(): string {
  const pkgFile = createRequire(import.meta.url).resolve("tsx/package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8")) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(pkgFile), pkg.exports["./esm/api"]!.import.default)).href;
}

type Pending = { resolve: (reply: WorkerReply & { ok: true }) => void; reject: (err: Error) => void };

/**
 * An ONNX Runtime session living on its own worker thread, with the surface of
 * `ort.InferenceSession`. Feeds are copied once into fresh buffers that are transferred
 * (the engine keeps and reuses its input arrays: the KV cache, the cached mask); outputs
 * come back transferred, without a copy. The worker holds the process open only while a
 * request is in flight, like a session on the main thread.
 */
class WorkerSession implements ort.InferenceSession {
  inputNames: readonly string[] = [];
  outputNames: readonly string[] = [];
  inputMetadata: readonly ort.InferenceSession.ValueMetadata[] = [];
  outputMetadata: readonly ort.InferenceSession.ValueMetadata[] = [];
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  /** Set once the worker is gone (released, crashed): every later request fails with it. */
  #gone: Error | undefined;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.unref();
    worker.on("message", (reply: WorkerReply) => {
      const p = this.#pending.get(reply.id);
      if (p === undefined) return;
      this.#settled(reply.id);
      if (reply.ok) p.resolve(reply);
      else p.reject(Object.assign(new Error(reply.error.message), { name: reply.error.name }));
    });
    const fail = (err: Error) => {
      this.#gone ??= err;
      for (const [id, p] of this.#pending) {
        this.#settled(id);
        p.reject(err);
      }
    };
    worker.on("error", (err) => fail(new Error(`ONNX Runtime worker failed: ${err.message}`, { cause: err })));
    worker.on("messageerror", (err) => fail(new Error(`ONNX Runtime worker message failed: ${err.message}`, { cause: err })));
    worker.on("exit", (code) => fail(new Error(`ONNX Runtime worker exited (code ${code})`)));
  }

  static async open(model: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<WorkerSession> {
    const session = new WorkerSession(startWorker());
    try {
      const reply = await session.#request({ kind: "open", id: 0, model, options });
      const opened = reply.opened as OpenedReply;
      session.inputNames = opened.inputNames;
      session.outputNames = opened.outputNames;
      session.inputMetadata = opened.inputMetadata;
      session.outputMetadata = opened.outputMetadata;
      return session;
    } catch (err) {
      session.#gone ??= new Error("ONNX Runtime session failed to open");
      await session.#worker.terminate();
      throw err;
    }
  }

  run(feeds: ort.InferenceSession.FeedsType, options?: ort.InferenceSession.RunOptions): Promise<ort.InferenceSession.ReturnType>;
  run(
    feeds: ort.InferenceSession.FeedsType,
    fetches: ort.InferenceSession.FetchesType,
    options?: ort.InferenceSession.RunOptions,
  ): Promise<ort.InferenceSession.ReturnType>;
  async run(
    feeds: ort.InferenceSession.FeedsType,
    fetchesOrOptions?: ort.InferenceSession.FetchesType | ort.InferenceSession.RunOptions,
    maybeOptions?: ort.InferenceSession.RunOptions,
  ): Promise<ort.InferenceSession.ReturnType> {
    const { fetches, options } = this.#fetchesAndOptions(fetchesOrOptions, maybeOptions);
    const transfer: ArrayBuffer[] = [];
    const wire: Record<string, WireTensor> = {};
    for (const [name, value] of Object.entries(feeds)) {
      if (!(value instanceof ort.Tensor)) throw new TypeError(`feed "${name}" is not an ort.Tensor`);
      const data = value.data;
      if (ArrayBuffer.isView(data)) {
        const copy = (data as Float32Array).slice();
        transfer.push(copy.buffer);
        wire[name] = { type: value.type, dims: value.dims, data: copy };
      } else {
        wire[name] = { type: value.type, dims: value.dims, data };
      }
    }
    const reply = await this.#request({ kind: "run", id: 0, feeds: wire, fetches, options }, transfer);
    const out: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(reply.outputs ?? {})) out[name] = new ort.Tensor(t.type, t.data as never, t.dims);
    return out;
  }

  async release(): Promise<void> {
    if (this.#gone !== undefined) return;
    try {
      await this.#request({ kind: "release", id: 0 });
    } finally {
      this.#gone ??= new Error("ONNX Runtime session was released");
      await this.#worker.terminate();
    }
  }

  startProfiling(): void {
    // As in onnxruntime-node: profiling starts with the session when its options enable it.
  }

  endProfiling(): void {
    throw new Error("endProfiling is not available on a worker-thread session (set TESSERA_ORT_WORKER=0)");
  }

  /** Sorts `run`'s optional arguments the way ONNX Runtime does: output names, or run options. */
  #fetchesAndOptions(
    arg: ort.InferenceSession.FetchesType | ort.InferenceSession.RunOptions | undefined,
    options: ort.InferenceSession.RunOptions | undefined,
  ): { fetches: string[] | undefined; options: ort.InferenceSession.RunOptions | undefined } {
    if (arg === undefined) return { fetches: undefined, options };
    if (Array.isArray(arg)) return { fetches: [...(arg as readonly string[])], options };
    const record = arg as Record<string, unknown>;
    const names = Object.keys(record).filter((k) => this.outputNames.includes(k));
    if (names.length === 0) return { fetches: undefined, options: arg as ort.InferenceSession.RunOptions };
    if (names.some((n) => record[n] !== null)) {
      throw new TypeError("pre-allocated output tensors are not supported on a worker-thread session");
    }
    return { fetches: names, options };
  }

  #request(req: WorkerRequest, transfer: ArrayBuffer[] = []): Promise<WorkerReply & { ok: true }> {
    if (this.#gone !== undefined) return Promise.reject(this.#gone);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      try {
        this.#worker.postMessage({ ...req, id }, transfer);
      } catch (err) {
        this.#settled(id);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.unref();
  }
}
