// The ONNX Runtime session on a worker thread. onnxruntime-node's `session.run` runs the
// model synchronously on the calling thread (its Promise only defers the call), so a forward
// on the main thread blocks the event loop for its whole length. The main-thread side is
// `WorkerSession` in onnx-session.ts; this file is the worker's entry point and the messages.
import { parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";

/** A tensor crossing the thread boundary: its data buffer is transferred, not copied. */
export interface WireTensor {
  type: ort.Tensor.Type;
  dims: readonly number[];
  data: ort.Tensor.DataType;
}

export type WorkerRequest =
  | { kind: "open"; id: number; model: string | Uint8Array; options: ort.InferenceSession.SessionOptions }
  | {
      kind: "run";
      id: number;
      feeds: Record<string, WireTensor>;
      fetches: string[] | undefined;
      options: ort.InferenceSession.RunOptions | undefined;
    }
  | { kind: "release"; id: number };

export interface OpenedReply {
  inputNames: string[];
  outputNames: string[];
  inputMetadata: ort.InferenceSession.ValueMetadata[];
  outputMetadata: ort.InferenceSession.ValueMetadata[];
}

export type WorkerReply =
  | { id: number; ok: true; opened?: OpenedReply; outputs?: Record<string, WireTensor> }
  | { id: number; ok: false; error: { name: string; message: string } };

/** Marks the worker data of a session worker, so importing this file elsewhere serves nothing. */
export const WORKER_MARK = "tessera-ort-worker";

/** The data of `t` and the buffers to transfer with it (each once: outputs may share one). */
function toWire(t: ort.Tensor, transfer: Set<ArrayBuffer>): WireTensor {
  const data = t.data;
  if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) transfer.add(data.buffer);
  return { type: t.type, dims: t.dims, data };
}

function serve(port: NonNullable<typeof parentPort>): void {
  let session: ort.InferenceSession | undefined;

  const handle = async (req: WorkerRequest): Promise<WorkerReply & { transfer?: ArrayBuffer[] }> => {
    switch (req.kind) {
      case "open": {
        if (session !== undefined) throw new Error("session already open");
        session = await (typeof req.model === "string"
          ? ort.InferenceSession.create(req.model, req.options)
          : ort.InferenceSession.create(req.model, req.options));
        return {
          id: req.id,
          ok: true,
          opened: {
            inputNames: [...session.inputNames],
            outputNames: [...session.outputNames],
            inputMetadata: [...session.inputMetadata],
            outputMetadata: [...session.outputMetadata],
          },
        };
      }
      case "run": {
        if (session === undefined) throw new Error("session is not open");
        const feeds: Record<string, ort.Tensor> = {};
        for (const [name, w] of Object.entries(req.feeds)) {
          feeds[name] = new ort.Tensor(w.type, w.data as never, w.dims);
        }
        const out =
          req.fetches !== undefined ? await session.run(feeds, req.fetches, req.options ?? {}) : await session.run(feeds, req.options ?? {});
        const transfer = new Set<ArrayBuffer>();
        const outputs: Record<string, WireTensor> = {};
        for (const [name, value] of Object.entries(out)) outputs[name] = toWire(value as ort.Tensor, transfer);
        return { id: req.id, ok: true, outputs, transfer: [...transfer] };
      }
      case "release": {
        const s = session;
        session = undefined;
        await s?.release();
        return { id: req.id, ok: true };
      }
    }
  };

  port.on("message", (req: WorkerRequest) => {
    handle(req).then(
      ({ transfer, ...reply }) => {
        try {
          port.postMessage(reply, transfer ?? []);
        } catch {
          // A buffer ONNX Runtime owns may refuse to detach: send a copy instead.
          port.postMessage(reply);
        }
      },
      (err: unknown) => {
        const error = err instanceof Error ? { name: err.name, message: err.message } : { name: "Error", message: String(err) };
        port.postMessage({ id: req.id, ok: false, error } satisfies WorkerReply);
      },
    );
  });
}

if (parentPort !== null && workerData === WORKER_MARK) serve(parentPort);
