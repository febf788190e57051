/** The worker thread of image-preprocessor.ts: Gemma 4's preprocessing off the event loop. */
import { parentPort } from "node:worker_threads";
import { type PreprocessedImage, preprocessImage, type VisionSettings } from "./image-preprocess.js";

export interface ImageJob {
  id: number;
  rgb: Uint8Array;
  width: number;
  height: number;
  settings: VisionSettings;
}

export type ImageReply = { id: number; out?: PreprocessedImage; error?: string };

parentPort!.on("message", (job: ImageJob) => {
  try {
    const out = preprocessImage(job.rgb, job.width, job.height, job.settings);
    parentPort!.postMessage({ id: job.id, out } satisfies ImageReply, [
      out.pixelValues.buffer as ArrayBuffer,
      out.positions.buffer as ArrayBuffer,
    ]);
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) } satisfies ImageReply);
  }
});
