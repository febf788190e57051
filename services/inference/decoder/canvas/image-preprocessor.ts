/**
 * Runs image-preprocess.ts on one worker thread (started on first use, unref'd while idle), so
 * resampling a large image never blocks the event loop. Jobs run in arrival order.
 */
import type { Worker } from "node:worker_threads";
import { startModuleWorker } from "../../module-worker.js";
import type { PreprocessedImage, VisionSettings } from "./image-preprocess.js";
import type { ImageJob } from "./image-worker.js";

type Reply = { id: number; out?: PreprocessedImage; error?: string };

export class ImagePreprocessor {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (r: PreprocessedImage) => void; reject: (e: Error) => void }>();

  run(rgb: Uint8Array, width: number, height: number, settings: VisionSettings): Promise<PreprocessedImage> {
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.ref();
      const job: ImageJob = { id, rgb, width, height, settings };
      worker.postMessage(job, [rgb.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    for (const p of this.pending.values()) p.reject(new Error("the image preprocessor was closed"));
    this.pending.clear();
    await worker?.terminate();
  }

  private start(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = startModuleWorker("image-worker", undefined, import.meta.url);
    worker.on("message", (reply: Reply) => {
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) worker.unref();
      if (reply.out !== undefined) p.resolve(reply.out);
      else p.reject(new RangeError(reply.error ?? "image preprocessing failed"));
    });
    worker.on("error", (err) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.worker = undefined;
    });
    worker.unref();
    this.worker = worker;
    return worker;
  }
}
