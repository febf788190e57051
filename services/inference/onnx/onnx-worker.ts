// The ONNX Runtime session on a worker thread. onnxruntime-node's `session.run` runs the
// model synchronously on the calling thread (its Promise only defers the call), so a forward
// on the main thread blocks the event loop for its whole length. The main-thread side is
// `WorkerSession` in onnx-worker-session.ts; this file is the worker's entry point and the messages.
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import { FLUSH_DENORMALS, threadFlushesDenormals } from "./onnx-denormals.js";
import { MirrorCopies, type MirrorUpdate, type MirrorView } from "./worker-mirrors.js";

/** A tensor crossing the thread boundary: its data buffer is transferred or shared, not copied. */
export interface WireTensor {
  type: ort.Tensor.Type;
  dims: readonly number[];
  data: ort.Tensor.DataType;
  /**
   * `data` is one batch row (float32) and every one of the `dims[0]` rows of the tensor equals
   * it: the worker writes the copies into a buffer it keeps (see repeatedRowFeed).
   */
  repeatsRow?: true;
  /**
   * With repeatsRow, for a row in shared memory: names that row (its buffer and place), which
   * does not change while it can be sent. Rows of the kept buffer written for the same key by
   * an earlier run are not written again.
   */
  rowKey?: string;
  /** A buffer lent for the run (see `lend` in onnx-worker-session.ts): sent back with the reply, whatever the outcome. */
  lent?: true;
  /**
   * Read from the worker's copy of a mirrored buffer (`mirror` in onnx-worker-session.ts); `data`
   * is then empty, unless the buffer is also lent to seed the copy.
   */
  mirror?: MirrorView;
}

export type WorkerRequest =
  | { kind: "open"; id: number; model: string | Uint8Array; options: ort.InferenceSession.SessionOptions }
  | {
      kind: "run";
      id: number;
      feeds: Record<string, WireTensor>;
      fetches: string[] | undefined;
      options: ort.InferenceSession.RunOptions | undefined;
      /** Mirrored buffers' copies to drop, then to update, before the feeds are read. */
      mirrors?: { drops: number[]; updates: MirrorUpdate[] };
    }
  | { kind: "forget-mirrors"; id: number }
  | { kind: "release"; id: number };

export interface OpenedReply {
  /** Whether this thread flushes denormal floats to zero (a worker started by onnx-host.ts does). */
  flushesDenormals: boolean;
  inputNames: string[];
  outputNames: string[];
  inputMetadata: ort.InferenceSession.ValueMetadata[];
  outputMetadata: ort.InferenceSession.ValueMetadata[];
}

/** Where a run's time went on the worker thread. */
export interface WorkerRunTiming {
  /** Writing repeated rows (repeatsRow feeds) and mirrored buffers' changes into the worker's buffers. */
  fillMs: number;
  /** ONNX Runtime's `session.run`. */
  runMs: number;
  /** When the request reached the worker and when its reply left, in epoch ms (epochNow), to time the messages each way. */
  receivedAt: number;
  sentAt: number;
}

/** Milliseconds since the epoch, comparable across threads (each thread's performance.now() has its own origin). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Lent feeds' data, given back by name. */
export type Returned = Record<string, ort.Tensor.DataType>;

export type WorkerReply =
  | { id: number; ok: true; opened?: OpenedReply; outputs?: Record<string, WireTensor>; timing?: WorkerRunTiming; returned?: Returned }
  | { id: number; ok: false; error: { name: string; message: string }; returned?: Returned };

/** Marks the worker data of a session worker, so importing this file elsewhere serves nothing. */
export const WORKER_MARK = "tessera-ort-worker";

/** A session worker's workerData: its mark, and the port of the thread it serves (onnx-host.ts starts it for the main thread). */
export interface SessionWorkerData {
  mark: typeof WORKER_MARK;
  port: MessagePort;
}

/** How long the buffers of repeated rows are kept unused before they are let go. */
const ROW_BUFFERS_IDLE_MS = 30_000;

/**
 * The buffers repeated rows are written into, one per feed name, kept between runs: the
 * batched past of a readout is tens to hundreds of MB, and fresh pages for every run cost
 * more than filling them. ONNX Runtime cannot take a SharedArrayBuffer, nor broadcast a past
 * across the batch, so the rows are materialised here, once, off the main thread.
 */
class RowBuffers {
  /** Per feed name: the buffer, and which row (rowKey) its first `rows` rows already hold. */
  private readonly buffers = new Map<string, { data: Float32Array; key: string | undefined; rows: number; rowLength: number }>();
  private timer: NodeJS.Timeout | undefined;

  /**
   * `rows` copies of `row`, end to end, in the buffer kept for `name`. A readout's forwards
   * all repeat the same past: with a `key`, the rows an earlier run wrote for that key are
   * kept, and only the rows past them are written (16 questions in 4 forwards: about 5 rows
   * written instead of 16).
   */
  fill(name: string, row: Float32Array, rows: number, key?: string): Float32Array {
    const length = rows * row.length;
    let kept = this.buffers.get(name);
    if (kept === undefined || kept.data.length < length) {
      this.buffers.delete(name);
      kept = { data: new Float32Array(length), key: undefined, rows: 0, rowLength: row.length };
      this.buffers.set(name, kept);
    }
    const reuse = key !== undefined && kept.key === key && kept.rowLength === row.length;
    const from = reuse ? Math.min(kept.rows, rows) : 0;
    const out = kept.data.subarray(0, length);
    // Copies from shared memory are slower in V8 than a plain memcpy: the row is read from
    // there once, and the other copies are taken from the first, in this buffer.
    if (from === 0 && rows > 0) out.set(row, 0);
    const first = out.subarray(0, row.length);
    for (let b = Math.max(from, 1); b < rows; b++) out.set(first, b * row.length);
    kept.key = key;
    kept.rowLength = row.length;
    kept.rows = reuse ? Math.max(kept.rows, rows) : rows;
    return out;
  }

  /** Called after every run: lets the buffers go once no run has used them for a while. */
  idle(): void {
    clearTimeout(this.timer);
    if (this.buffers.size === 0) return;
    this.timer = setTimeout(() => this.buffers.clear(), ROW_BUFFERS_IDLE_MS);
    this.timer.unref();
  }
}

/** The data of `t` and the buffers to transfer with it (each once: outputs may share one). */
function toWire(t: ort.Tensor, transfer: Set<ArrayBuffer>): WireTensor {
  const data = t.data;
  if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) transfer.add(data.buffer);
  return { type: t.type, dims: t.dims, data };
}

/**
 * A tensor over `w`'s data. ONNX Runtime refuses views of a SharedArrayBuffer, so shared data
 * (which the main thread sends to avoid a copy there) is copied here into a plain buffer.
 */
function tensorOf(name: string, w: WireTensor, rowBuffers: RowBuffers, mirrors: MirrorCopies): ort.Tensor {
  if (w.mirror !== undefined && w.lent !== true) return new ort.Tensor(w.type, mirrors.view(w.mirror), w.dims);
  if (w.repeatsRow === true) {
    if (!(w.data instanceof Float32Array)) throw new TypeError(`feed "${name}": repeated rows must be float32`);
    return new ort.Tensor(w.type, rowBuffers.fill(name, w.data, w.dims[0] ?? 1, w.rowKey), w.dims);
  }
  let data = w.data;
  if (ArrayBuffer.isView(data) && !(data.buffer instanceof ArrayBuffer)) data = (data as Float32Array).slice();
  return new ort.Tensor(w.type, data as never, w.dims);
}

function serve(port: MessagePort): void {
  let session: ort.InferenceSession | undefined;
  const rowBuffers = new RowBuffers();
  const mirrors = new MirrorCopies();

  /** The lent feeds of the request being handled, to go back with its reply (an error's too). */
  let lent: { returned: Returned; transfer: Set<ArrayBuffer> } | undefined;
  const handle = async (req: WorkerRequest, receivedAt: number): Promise<WorkerReply & { transfer?: ArrayBuffer[] }> => {
    switch (req.kind) {
      case "open": {
        if (session !== undefined) throw new Error("session already open");
        const extra = req.options.extra ?? {};
        const sessionConfig = { ...(extra.session as object | undefined), ...FLUSH_DENORMALS.session };
        const options = { ...req.options, extra: { ...extra, session: sessionConfig } };
        session = await (typeof req.model === "string"
          ? ort.InferenceSession.create(req.model, options)
          : ort.InferenceSession.create(req.model, options));
        return {
          id: req.id,
          ok: true,
          opened: {
            flushesDenormals: threadFlushesDenormals(),
            inputNames: [...session.inputNames],
            outputNames: [...session.outputNames],
            inputMetadata: [...session.inputMetadata],
            outputMetadata: [...session.outputMetadata],
          },
        };
      }
      case "run": {
        for (const [name, w] of Object.entries(req.feeds)) {
          if (w.lent !== true) continue;
          lent ??= { returned: {}, transfer: new Set() };
          lent.returned[name] = w.data;
          // A set: lent views of one buffer (a cache's store) send it back once.
          if (ArrayBuffer.isView(w.data) && w.data.buffer instanceof ArrayBuffer) lent.transfer.add(w.data.buffer);
        }
        if (session === undefined) throw new Error("session is not open");
        try {
          const filled = performance.now();
          if (req.mirrors !== undefined) {
            mirrors.drop(req.mirrors.drops);
            for (const update of req.mirrors.updates) mirrors.apply(update);
            // A seeded copy takes the lent buffer's views; this run reads the lent buffer itself.
            for (const w of Object.values(req.feeds))
              if (w.lent === true && w.mirror !== undefined) mirrors.seed(w.mirror.id, w.data as Float32Array);
          }
          const feeds: Record<string, ort.Tensor> = {};
          for (const [name, w] of Object.entries(req.feeds)) feeds[name] = tensorOf(name, w, rowBuffers, mirrors);
          const started = performance.now();
          const out =
            req.fetches !== undefined
              ? await session.run(feeds, req.fetches, req.options ?? {})
              : await session.run(feeds, req.options ?? {});
          const timing = { fillMs: started - filled, runMs: performance.now() - started, receivedAt, sentAt: 0 };
          const transfer = new Set<ArrayBuffer>();
          const outputs: Record<string, WireTensor> = {};
          for (const [name, value] of Object.entries(out)) outputs[name] = toWire(value as ort.Tensor, transfer);
          return { id: req.id, ok: true, outputs, timing, transfer: [...transfer] };
        } finally {
          rowBuffers.idle();
        }
      }
      case "forget-mirrors": {
        mirrors.clear();
        return { id: req.id, ok: true };
      }
      case "release": {
        const s = session;
        session = undefined;
        await s?.release();
        return { id: req.id, ok: true };
      }
    }
  };

  // One request at a time, in order: a run's feeds may sit in the shared row buffers, which the
  // next run's feeds would overwrite.
  let tail: Promise<unknown> = Promise.resolve();
  port.on("message", (req: WorkerRequest) => {
    const receivedAt = epochNow();
    const done = tail.then(() =>
      handle(req, receivedAt).then(
        ({ transfer, ...reply }) => {
          const back = lent;
          lent = undefined;
          const full = back === undefined ? reply : { ...reply, returned: back.returned };
          if ("timing" in full && full.timing !== undefined) full.timing.sentAt = epochNow();
          try {
            port.postMessage(full, [...(transfer ?? []), ...(back?.transfer ?? [])]);
          } catch {
            // A buffer ONNX Runtime owns may refuse to detach: send a copy instead.
            port.postMessage(full);
          }
        },
        (err: unknown) => {
          const back = lent;
          lent = undefined;
          const error = err instanceof Error ? { name: err.name, message: err.message } : { name: "Error", message: String(err) };
          const reply: WorkerReply = { id: req.id, ok: false, error, ...(back === undefined ? {} : { returned: back.returned }) };
          port.postMessage(reply, [...(back?.transfer ?? [])]);
        },
      ),
    );
    tail = done.catch(() => undefined); // a reply that could not be sent must not stop the requests after it
  });
}

const data = workerData as Partial<SessionWorkerData> | undefined;
if (parentPort !== null && data?.mark === WORKER_MARK && data.port !== undefined) serve(data.port);
