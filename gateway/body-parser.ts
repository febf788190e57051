import { startModuleWorker } from "../lib/module-worker.js";
import { WorkerChannel } from "../lib/worker-channel.js";
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
  const channel = new WorkerChannel<BodyJob, BodyAnswer>({
    start: () => startModuleWorker("body-worker", import.meta.url),
    name: "the body worker",
    restart: true,
    lazy: true,
    settle(answer) {
      if ("value" in answer) return { value: answer.value };
      if ("failed" in answer) return { error: new Error(`body worker: ${answer.failed}`) };
      const { status, type, message, options: refusal } = answer.refused;
      return { error: new HttpError(status, type, message, refusal) };
    },
  });

  return {
    parse(bytes, prepare) {
      if (bytes.length < fromBytes) return prepareBody(bytes, prepare);
      // Transfer the memory when the buffer owns all of it (Buffer.concat's result); copy a slice of a shared one.
      const owns = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && !(bytes.buffer instanceof SharedArrayBuffer);
      return channel.call({ bytes, prepare }, owns ? [bytes.buffer as ArrayBuffer] : []);
    },
    async close() {
      await channel.terminate();
    },
  };
}
