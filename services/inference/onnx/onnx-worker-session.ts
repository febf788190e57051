// The main-thread side of an ONNX Runtime session on a worker thread (onnx-worker.ts is the
// worker): `WorkerSession`, with the surface of `ort.InferenceSession`; `repeatedRowFeed`,
// which sends a batch whose rows all repeat one row (a readout's past) as that one row; and
// `handOver`, which sends a feed's buffer without a copy.
import * as ort from "onnxruntime-node";
import { type Unnumbered, WorkerChannel } from "../../../lib/worker-channel.js";
import { startSessionWorker } from "./onnx-host-client.js";
import { epochNow, type OpenedReply, type Returned, type WireTensor, type WorkerReply, type WorkerRequest } from "./onnx-worker.js";
import { MIRRORS_IDLE_MS, MirrorRegistry, type MirrorSource, type MirrorUpdate } from "./worker-mirrors.js";

export type { MirrorPatch, MirrorSource } from "./worker-mirrors.js";

/** Ids of the shared buffers rows were sent from (see WireTensor.rowKey). */
const sharedIds = new WeakMap<SharedArrayBuffer, number>();
let nextSharedId = 0;

/** The key of a row in shared memory: its buffer and place; undefined for a row that is copied. */
function rowKeyOf(row: Float32Array): string | undefined {
  if (!(row.buffer instanceof SharedArrayBuffer)) return undefined;
  let id = sharedIds.get(row.buffer);
  if (id === undefined) {
    id = nextSharedId++;
    sharedIds.set(row.buffer, id);
  }
  return `${id}:${row.byteOffset}:${row.length}`;
}

/**
 * Gives the rows of `buffer` new keys, for a shared buffer that is written again (a pooled store
 * taken for another decision's past): the worker then writes their copies afresh instead of
 * keeping the ones it wrote of the old contents.
 */
export function renewSharedRows(buffer: SharedArrayBuffer): void {
  sharedIds.delete(buffer);
}

/** Feeds made by repeatedRowFeed, and the row each repeats. */
const repeatedRows = new WeakMap<Float32Array, Float32Array>();
/** Backs every repeatedRowFeed: never read, and written only where it is poisoned. */
let placeholder = new ArrayBuffer(0);

/**
 * A float32 feed of `rows` batch rows that all equal `row` (the prefix's past, continued by
 * every readout row: ONNX Runtime cannot broadcast a past across the batch), for a session on a
 * worker thread. Only `row` crosses to the worker — without a copy when it is a view of a
 * SharedArrayBuffer — and the worker writes the rows into a buffer it keeps. A row in shared
 * memory must not change once sent: the worker keeps the copies it wrote of it, and a later
 * feed of the same row writes only the rows past those (a readout's forwards all repeat one past).
 *
 * The array returned only gives the tensor its length and identifies the feed: its memory is a
 * placeholder that is never filled (so it costs no resident memory). The first element of each
 * row is NaN, so a feed that reached any session other than a worker session would give NaN
 * rather than quietly wrong numbers. Use it only for feeds of a session isWorkerSession accepts.
 */
export function repeatedRowFeed(row: Float32Array, rows: number): Float32Array {
  if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`rows must be a positive integer, got ${rows}`);
  const length = rows * row.length;
  if (placeholder.byteLength < length * Float32Array.BYTES_PER_ELEMENT) {
    placeholder = new ArrayBuffer(length * Float32Array.BYTES_PER_ELEMENT);
  }
  const feed = new Float32Array(placeholder, 0, length);
  for (let b = 0; b < rows && row.length > 0; b++) feed[b * row.length] = Number.NaN;
  repeatedRows.set(feed, row);
  return feed;
}

/** Feeds marked by handOver. */
const handedOver = new WeakSet<ArrayBufferView>();

/**
 * Marks `data` as the caller's to give away: a worker session transfers its buffer to the
 * worker instead of copying it, which leaves `data` empty (detached) once `run` is called.
 * Only for arrays nobody reads again, alone on their buffer; other sessions ignore the mark.
 */
export function handOver<T extends ArrayBufferView>(data: T): T {
  handedOver.add(data);
  return data;
}

/** Feeds marked by lend, and where each is given back. */
const lentFeeds = new WeakMap<ArrayBufferView, (back: ArrayBufferView) => void>();

/**
 * Marks `data` as lent to a worker session's run: its buffer is transferred to the worker (no
 * copy), which sends it back with the reply, success or failure, and `giveBack` receives it
 * (a new view of the same memory) before `run` settles. Meanwhile `data` is empty (detached);
 * should the worker die, the buffer is lost and `data` stays empty, which the lender must
 * check before reusing it. For a feed the caller keeps and feeds again (a batch's past, tens
 * to hundreds of MB: a fresh copy each run costs its page faults every forward). For an array
 * alone on its buffer, or for views of one buffer that are all lent to the same run (a cache's
 * store, kv-pool.ts: the buffer crosses once); other sessions ignore the mark.
 */
export function lend<T extends ArrayBufferView>(data: T, giveBack: (back: T) => void): T {
  lentFeeds.set(data, giveBack as (back: ArrayBufferView) => void);
  return data;
}

/** Feeds marked by mirror: the buffer's source, and where the feed is given back when the buffer is lent to seed the copy. */
type MirroredFeed = { source: MirrorSource; giveBack: (back: Float32Array) => void };
const mirroredFeeds = new WeakMap<Float32Array, MirroredFeed>();

/**
 * Marks `data`, a float32 view of `source.buffer`, as read from the copy of that buffer a worker
 * session keeps between runs: the run sends only what `source` says changed since the copy was
 * last written, and `data` stays here, usable. For a feed fed again and again while written a
 * little at a time (a lone reply's key/value store, worker-mirrors.ts); other sessions read
 * `data` itself. When most of the buffer changed (a new copy, a prompt's slots), the buffer is
 * lent for the run instead (see `lend`): `giveBack` then receives the view back.
 */
export function mirror(data: Float32Array, source: MirrorSource, giveBack: (back: Float32Array) => void): Float32Array {
  if (data.buffer !== source.buffer) throw new Error("a mirrored feed must be a view of its source's buffer");
  mirroredFeeds.set(data, { source, giveBack });
  return data;
}

/** Whether `session` runs on a worker thread (and so takes repeatedRowFeed's feeds). */
export function isWorkerSession(session: ort.InferenceSession): boolean {
  return session instanceof WorkerSession;
}

/**
 * Where a worker session's run spent its time: the worker's fill and ONNX Runtime run, the
 * messages each way (the request, with the transferred past, to the worker; the reply back),
 * and the whole round trip as the caller saw it.
 */
export interface WorkerRunTimes {
  fillMs: number;
  runMs: number;
  toWorkerMs: number;
  toMainMs: number;
  totalMs: number;
}

/** Where the last run of a worker session spent its time, or undefined for another session. */
export function lastWorkerRun(session: ort.InferenceSession): WorkerRunTimes | undefined {
  return session instanceof WorkerSession ? session.lastRun : undefined;
}

/** Data that can cross to the worker without a copy, else a copy, and what to transfer. */
function sendable(data: ArrayBufferView, transfer: ArrayBuffer[]): ArrayBufferView {
  if (!(data.buffer instanceof ArrayBuffer)) return data; // shared memory: the worker sees the same bytes
  if (handedOver.has(data) && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && !transfer.includes(data.buffer)) {
    transfer.push(data.buffer);
    return data;
  }
  const copy = (data as Float32Array).slice();
  transfer.push(copy.buffer);
  return copy;
}

/**
 * An ONNX Runtime session living on its own worker thread, with the surface of
 * `ort.InferenceSession`. Feeds are copied once into fresh buffers that are transferred
 * (the engine keeps and reuses its input arrays: the KV cache, the cached mask), except views
 * of a SharedArrayBuffer, which the worker reads in place, feeds marked by handOver, which are
 * transferred, and repeatedRowFeed's feeds, of which only the row is sent; outputs come back transferred, without a copy. The worker holds
 * the process open only while a request is in flight, like a session on the main thread.
 */
export class WorkerSession implements ort.InferenceSession {
  inputNames: readonly string[] = [];
  outputNames: readonly string[] = [];
  inputMetadata: readonly ort.InferenceSession.ValueMetadata[] = [];
  outputMetadata: readonly ort.InferenceSession.ValueMetadata[] = [];
  /** The session's worker thread (onnx-worker.ts); gone once released or crashed, after which every request fails. */
  readonly #channel = new WorkerChannel<WorkerRequest, WorkerReply>({
    start: startSessionWorker,
    name: "ONNX Runtime worker",
    settle: (reply) =>
      reply.ok
        ? { value: reply }
        : { error: Object.assign(new Error(reply.error.message), { name: reply.error.name, returned: reply.returned }) },
  });
  /** Whether the worker's thread flushes denormal floats to zero (onnx-host.ts says why it matters). */
  flushesDenormals = false;
  /** Where the last run spent its time (see WorkerRunTimes). */
  lastRun: WorkerRunTimes | undefined;
  /** The worker's copies of mirrored buffers (see `mirror`). */
  readonly #mirrors = new MirrorRegistry();
  #mirrorsIdle: NodeJS.Timeout | undefined;

  private constructor() {}

  static async open(model: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<WorkerSession> {
    const session = new WorkerSession();
    try {
      const reply = await session.#request({ kind: "open", model, options });
      const opened = reply.opened as OpenedReply;
      session.inputNames = opened.inputNames;
      session.outputNames = opened.outputNames;
      session.inputMetadata = opened.inputMetadata;
      session.outputMetadata = opened.outputMetadata;
      session.flushesDenormals = opened.flushesDenormals;
      return session;
    } catch (err) {
      await session.#channel.terminate(new Error("ONNX Runtime session failed to open"));
      throw err;
    }
  }

  run(feeds: ort.InferenceSession.FeedsType, options?: ort.InferenceSession.RunOptions): Promise<ort.InferenceSession.ReturnType>;
  run(
    feeds: ort.InferenceSession.FeedsType,
    fetches: ort.InferenceSession.FetchesType,
    options?: ort.InferenceSession.RunOptions,
  ): Promise<ort.InferenceSession.ReturnType>;
  async run(
    feeds: ort.InferenceSession.FeedsType,
    fetchesOrOptions?: ort.InferenceSession.FetchesType | ort.InferenceSession.RunOptions,
    maybeOptions?: ort.InferenceSession.RunOptions,
  ): Promise<ort.InferenceSession.ReturnType> {
    const { fetches, options } = this.#fetchesAndOptions(fetchesOrOptions, maybeOptions);
    const started = performance.now();
    const transfer: ArrayBuffer[] = [];
    const wire: Record<string, WireTensor> = {};
    const giveBack = new Map<string, (back: ArrayBufferView) => void>();
    /** Buffers transferred for lent feeds: further lent views of one go with it. */
    const lentBuffers = new Set<ArrayBuffer>();
    /** Mirrored buffers this run reads, by buffer: the copy's id (each buffer synced once). */
    const mirrored = new Map<ArrayBuffer, { id: number; seed: boolean }>();
    const updates: MirrorUpdate[] = [];
    // Checked before any mirrored copy is synced: a sync counts its changes as sent.
    for (const [name, value] of Object.entries(feeds)) {
      if (!(value instanceof ort.Tensor)) throw new TypeError(`feed "${name}" is not an ort.Tensor`);
    }
    for (const [name, value] of Object.entries(feeds) as [string, ort.Tensor][]) {
      const data = value.data;
      const row = data instanceof Float32Array ? repeatedRows.get(data) : undefined;
      const lender = ArrayBuffer.isView(data) ? lentFeeds.get(data) : undefined;
      const entry = data instanceof Float32Array ? mirroredFeeds.get(data) : undefined;
      if (entry !== undefined) {
        wire[name] = this.#mirroredWire(name, value, entry, { mirrored, updates, transfer, giveBack });
      } else if (
        lender !== undefined &&
        ArrayBuffer.isView(data) &&
        data.buffer instanceof ArrayBuffer &&
        (lentBuffers.has(data.buffer) || !transfer.includes(data.buffer))
      ) {
        if (!lentBuffers.has(data.buffer)) {
          lentBuffers.add(data.buffer);
          transfer.push(data.buffer);
        }
        giveBack.set(name, lender);
        wire[name] = { type: value.type, dims: value.dims, data: data as ort.Tensor.DataType, lent: true };
      } else if (row !== undefined) {
        const rowKey = rowKeyOf(row);
        wire[name] = {
          type: value.type,
          dims: value.dims,
          data: sendable(row, transfer) as Float32Array,
          repeatsRow: true,
          ...(rowKey === undefined ? {} : { rowKey }),
        };
      } else if (ArrayBuffer.isView(data)) {
        wire[name] = { type: value.type, dims: value.dims, data: sendable(data, transfer) as ort.Tensor.DataType };
      } else {
        wire[name] = { type: value.type, dims: value.dims, data };
      }
    }
    const returnLent = (returned: Returned | undefined) => {
      for (const [name, back] of Object.entries(returned ?? {})) giveBack.get(name)?.(back as ArrayBufferView);
    };
    const drops = this.#mirrors.takeDrops();
    const mirrors = drops.length > 0 || updates.length > 0 ? { mirrors: { drops, updates } } : {};
    let reply: WorkerReply & { ok: true };
    const sentAt = epochNow();
    try {
      reply = await this.#request({ kind: "run", feeds: wire, fetches, options, ...mirrors }, transfer);
    } catch (err) {
      // The copies this run read may be half written: the next run sends them afresh.
      this.#mirrors.forget([...mirrored.values()].map((m) => m.id));
      returnLent((err as { returned?: Returned }).returned);
      throw err;
    } finally {
      if (mirrored.size > 0 || drops.length > 0) this.#forgetMirrorsWhenIdle();
    }
    returnLent(reply.returned);
    const out: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(reply.outputs ?? {})) out[name] = new ort.Tensor(t.type, t.data as never, t.dims);
    const t = reply.timing;
    if (t !== undefined) {
      this.lastRun = {
        fillMs: t.fillMs,
        runMs: t.runMs,
        toWorkerMs: t.receivedAt - sentAt,
        toMainMs: epochNow() - t.sentAt,
        totalMs: performance.now() - started,
      };
    }
    return out;
  }

  /**
   * A mirrored feed on the wire: read from the worker's copy, brought up to date once per buffer
   * and run (`mirrored`); when the copy is seeded, the feed is lent as well and comes back through
   * `giveBack`, its copy then found by the buffer that came back.
   */
  #mirroredWire(
    name: string,
    value: ort.Tensor,
    entry: MirroredFeed,
    run: {
      mirrored: Map<ArrayBuffer, { id: number; seed: boolean }>;
      updates: MirrorUpdate[];
      transfer: ArrayBuffer[];
      giveBack: Map<string, (back: ArrayBufferView) => void>;
    },
  ): WireTensor {
    const view = value.data as Float32Array;
    const { source } = entry;
    let copy = run.mirrored.get(source.buffer);
    if (copy === undefined) {
      const { id, update } = this.#mirrors.sync(source);
      copy = { id, seed: update?.seed === true };
      run.mirrored.set(source.buffer, copy);
      if (update !== undefined) run.updates.push(update);
      if (update?.patch !== undefined)
        run.transfer.push(update.patch.starts.buffer as ArrayBuffer, update.patch.data.buffer as ArrayBuffer);
      if (copy.seed) run.transfer.push(source.buffer);
    }
    const place = { id: copy.id, byteOffset: view.byteOffset, length: view.length };
    if (!copy.seed) return { type: value.type, dims: value.dims, data: new Float32Array(0), mirror: place };
    const id = copy.id;
    run.giveBack.set(name, (back) => {
      entry.giveBack(back as Float32Array);
      this.#mirrors.lentBack(id, back.buffer as ArrayBuffer);
    });
    return { type: value.type, dims: value.dims, data: view, lent: true, mirror: place };
  }

  /** Mirrored buffers' copies the worker keeps now (for tests). */
  get mirrorCopies(): number {
    return this.#mirrors.size;
  }

  /** Lets the worker's copies go once no run has read one for MIRRORS_IDLE_MS, as the key/value pool lets its stores go. */
  #forgetMirrorsWhenIdle(): void {
    clearTimeout(this.#mirrorsIdle);
    this.#mirrorsIdle = setTimeout(() => {
      this.#mirrors.forgetAll();
      this.#request({ kind: "forget-mirrors" }).catch(() => undefined); // a gone worker took its copies with it
    }, MIRRORS_IDLE_MS);
    this.#mirrorsIdle.unref();
  }

  async release(): Promise<void> {
    clearTimeout(this.#mirrorsIdle);
    if (this.#channel.gone !== undefined) return;
    try {
      await this.#request({ kind: "release" });
    } finally {
      await this.#channel.terminate(new Error("ONNX Runtime session was released"));
    }
  }

  startProfiling(): void {
    // As in onnxruntime-node: profiling starts with the session when its options enable it.
  }

  endProfiling(): void {
    throw new Error("endProfiling is not available on a worker-thread session (set TESSERA_ORT_WORKER=0)");
  }

  /** Sorts `run`'s optional arguments the way ONNX Runtime does: output names, or run options. */
  #fetchesAndOptions(
    arg: ort.InferenceSession.FetchesType | ort.InferenceSession.RunOptions | undefined,
    options: ort.InferenceSession.RunOptions | undefined,
  ): { fetches: string[] | undefined; options: ort.InferenceSession.RunOptions | undefined } {
    if (arg === undefined) return { fetches: undefined, options };
    if (Array.isArray(arg)) return { fetches: [...(arg as readonly string[])], options };
    const record = arg as Record<string, unknown>;
    const names = Object.keys(record).filter((k) => this.outputNames.includes(k));
    if (names.length === 0) return { fetches: undefined, options: arg as ort.InferenceSession.RunOptions };
    if (names.some((n) => record[n] !== null)) {
      throw new TypeError("pre-allocated output tensors are not supported on a worker-thread session");
    }
    return { fetches: names, options };
  }

  #request(req: Unnumbered<WorkerRequest>, transfer: ArrayBuffer[] = []): Promise<WorkerReply & { ok: true }> {
    return this.#channel.call(req, transfer);
  }
}
