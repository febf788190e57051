/**
 * Decodes images and runs image-preprocess.ts on one worker thread (started on first use,
 * unref'd while idle), so neither the decoded pixels (up to 100 MB for 33.5 Mpx) nor resampling
 * them ever touch the event loop. Jobs run one at a time, in arrival order.
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

  run(bytes: Uint8Array, limits: ImageJob["limits"], settings: ImageJob["settings"]): Promise<PreprocessedImage> {
    return this.channel.call({ bytes, limits, settings });
  }

  close(): Promise<void> {
    return this.channel.terminate(new Error("the image preprocessor was closed"));
  }
}
