import type { Worker } from "node:worker_threads";
import { startModuleWorker } from "../services/inference/module-worker.js";
import { prepareBody, type BodyPreparer } from "./body-prepare.js";
import type { BodyAnswer, BodyJob } from "./body-worker.js";
import { HttpError } from "./errors.js";

/**
 * Bodies at least this large are parsed on the body worker. Below it, parsing inline costs less
 * than the trip (a 128 KiB body parses in about a millisecond; 7.4 MB took 40–150 ms of the
 * event loop with the chat schema's validation, several times that on a loaded machine).
 */
export const WORKER_BODY_BYTES = 128 * 1024;

/** Parses and prepares JSON bodies: small ones inline, large ones on a worker thread. */
export interface BodyParser {
  parse(bytes: Buffer, prepare?: BodyPreparer): unknown;
  /** Stops the worker, if one was started. */
  close(): Promise<void>;
}

export interface BodyParserOptions {
  /** Bodies of at least this many bytes go to the worker. Default WORKER_BODY_BYTES. */
  workerFromBytes?: number;
}

/**
 * One worker thread, started on the first large body, parses them one at a time (the order
 * they arrive; a single thread bounds the CPU large bodies can take from the rest). The
 * buffer is transferred, not copied; the value comes back by structured clone, which costs
 * the event loop a fraction of what parsing and validating did. A worker that dies fails its
 * jobs (500) and is replaced on the next large body.
 */
export function createBodyParser(options: BodyParserOptions = {}): BodyParser {
  const fromBytes = options.workerFromBytes ?? WORKER_BODY_BYTES;
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();

  function failAll(err: Error): void {
    worker = undefined;
    for (const job of pending.values()) job.reject(err);
    pending.clear();
  }

  function started(): Worker {
    if (worker !== undefined) return worker;
    const w = startModuleWorker("body-worker", undefined, import.meta.url);
    w.unref();
    w.on("message", (answer: BodyAnswer) => {
      const job = pending.get(answer.id);
      if (job === undefined) return;
      pending.delete(answer.id);
      if ("value" in answer) job.resolve(answer.value);
      else if ("refused" in answer) {
        const { status, type, message, options: refusal } = answer.refused;
        job.reject(new HttpError(status, type, message, refusal));
      } else job.reject(new Error(`body worker: ${answer.failed}`));
    });
    w.on("error", (err) => {
      if (worker === w) failAll(err);
    });
    w.on("exit", (code) => {
      if (worker === w) failAll(new Error(`body worker exited with code ${code}`));
    });
    worker = w;
    return w;
  }

  return {
    parse(bytes, prepare) {
      if (bytes.length < fromBytes) return prepareBody(bytes, prepare);
      const w = started();
      const id = nextId++;
      const job: BodyJob = { id, bytes, prepare };
      // Transfer the memory when the buffer owns all of it (Buffer.concat's result); copy a slice of a shared one.
      const owns = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && !(bytes.buffer instanceof SharedArrayBuffer);
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        w.postMessage(job, owns ? [bytes.buffer as ArrayBuffer] : []);
      });
    },
    async close() {
      const w = worker;
      worker = undefined;
      if (w !== undefined) await w.terminate();
    },
  };
}
