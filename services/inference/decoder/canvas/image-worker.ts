/** The worker thread of image-preprocessor.ts: Gemma 4's preprocessing off the event loop. */
import { parentPort } from "node:worker_threads";
import { preprocessImage, type VisionSettings } from "./image-preprocess.js";

export interface ImageJob {
  id: number;
  rgb: Uint8Array;
  width: number;
  height: number;
  settings: VisionSettings;
}

parentPort!.on("message", (job: ImageJob) => {
  try {
    const out = preprocessImage(job.rgb, job.width, job.height, job.settings);
    parentPort!.postMessage({ id: job.id, out }, [out.pixelValues.buffer as ArrayBuffer, out.positions.buffer as ArrayBuffer]);
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) });
  }
});
