// The body worker's thread: parses (and prepares) the large JSON bodies body-parser.ts sends it.
import { parentPort } from "node:worker_threads";
import { prepareBody, type BodyPreparer } from "./body-prepare.js";
import { HttpError } from "./errors.js";

export interface BodyJob {
  id: number;
  bytes: Uint8Array;
  prepare: BodyPreparer | undefined;
}

export type BodyAnswer =
  | { id: number; value: unknown }
  | { id: number; refused: { status: number; type: string; message: string; options: HttpError["options"] } }
  | { id: number; failed: string };

const port = parentPort!;
port.on("message", ({ id, bytes, prepare }: BodyJob) => {
  let answer: BodyAnswer;
  try {
    answer = { id, value: prepareBody(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), prepare) };
  } catch (err) {
    answer =
      err instanceof HttpError
        ? { id, refused: { status: err.status, type: err.type, message: err.message, options: err.options } }
        : { id, failed: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  port.postMessage(answer);
});
