/**
 * Runs image-preprocess.ts on one worker thread (started on first use, unref'd while idle), so
 * resampling a large image never blocks the event loop. Jobs run in arrival order.
 */
import { startModuleWorker } from "../../../../lib/module-worker.js";
import { WorkerChannel } from "../../../../lib/worker-channel.js";
import type { PreprocessedImage } from "./image-preprocess.js";
import type { ImageJob, ImageReply } from "./image-worker.js";

export class ImagePreprocessor {
  private readonly channel = new WorkerChannel<ImageJob, ImageReply>({
    start: () => startModuleWorker("image-worker", import.meta.url),
    name: "the image preprocessor",
    restart: true,
    lazy: true,
    // A RangeError: the image cannot be preprocessed (a 400 to the caller).
    settle: (reply) =>
      reply.out !== undefined ? { value: reply.out } : { error: new RangeError(reply.error ?? "image preprocessing failed") },
  });

  run(rgb: Uint8Array, width: number, height: number, settings: ImageJob["settings"]): Promise<PreprocessedImage> {
    return this.channel.call({ rgb, width, height, settings }, [rgb.buffer as ArrayBuffer]);
  }

  close(): Promise<void> {
    return this.channel.terminate(new Error("the image preprocessor was closed"));
  }
}
