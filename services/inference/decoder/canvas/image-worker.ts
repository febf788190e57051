/** The worker thread of image-preprocessor.ts: decoding (sharp) and Gemma 4's preprocessing off the event loop. */
import { parentPort } from "node:worker_threads";
import { decodeImage, type ImageLimits } from "./image-decode.js";
import { type PreprocessedImage, preprocessImage, type VisionSettings } from "./image-preprocess.js";

export interface ImageJob {
  id: number;
  /** The image file's bytes (PNG, JPEG or WebP), already probed against `limits`. */
  bytes: Uint8Array;
  limits: ImageLimits;
  settings: VisionSettings;
}

export type ImageReply = { id: number; out?: PreprocessedImage; error?: string };

async function run(job: ImageJob): Promise<void> {
  try {
    const image = await decodeImage(job.bytes, job.limits);
    const out = preprocessImage(image.rgb, image.width, image.height, job.settings);
    parentPort!.postMessage({ id: job.id, out } satisfies ImageReply, [
      out.pixelValues.buffer as ArrayBuffer,
      out.positions.buffer as ArrayBuffer,
    ]);
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) } satisfies ImageReply);
  }
}

// One image at a time, so that at most one image's pixels are held (sharp's decoding is asynchronous).
let queue = Promise.resolve();
parentPort!.on("message", (job: ImageJob) => {
  queue = queue.then(() => run(job));
});
