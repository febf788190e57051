// Key/values that stay on the device (the WebGPU execution provider): a sequence's cache is one
// `[1, H_kv, T, D]` tensor per layer and direction in device memory, extended and batched by
// the small graphs of onnx-kv-graphs.ts on the same provider. Nothing here reads or writes the
// key/values on the host; docs/model-contract.md ("Key/values on the device") has the layout
// and its cost.
import * as ort from "onnxruntime-node";
import type { KVShape, PresentKV } from "./forward.js";
import type { OpenDeviceGraph } from "../onnx/onnx-session.js";

/** The graphs that move key/values on the device, and the device memory the caches hold. */
export interface DeviceKVOps {
  readonly shape: KVShape;
  /** `cache` (undefined: none yet) extended by slots `[from, from + count)` of row `row` of `present`. */
  append(
    cache: readonly ort.Tensor[] | undefined,
    present: readonly ort.Tensor[],
    row: number,
    from: number,
    count: number,
  ): Promise<ort.Tensor[]>;
  /** The rows' caches stacked into one batch, each padded to `past` slots. */
  gather(rows: readonly (readonly ort.Tensor[])[], lengths: readonly number[], past: number): Promise<ort.Tensor[]>;
  /** `tensor` brought to host memory (a device tensor cannot be read in place: getData aborts the process in onnxruntime-node 1.30). */
  download(tensor: ort.Tensor): Promise<Float32Array>;
  /** Counts `tensors` as held (their bytes in heldBytes) until dispose. */
  hold(tensors: readonly ort.Tensor[]): void;
  dispose(tensors: readonly ort.Tensor[]): void;
  /** Bytes of device memory held now by caches, batches and presents waiting to be stored. */
  readonly heldBytes: number;
  /** Tensors held now (tests: everything is given back). */
  readonly heldTensors: number;
  /** Called with heldBytes whenever it changes (the engine's gauge). */
  onHeld: ((bytes: number) => void) | undefined;
  close(): Promise<void>;
}

const bytesOf = (t: ort.Tensor) => t.dims.reduce((n, d) => n * d, 1) * 4;

/** The device key/value operations for a model of `shape`, on sessions `open` makes. */
export function deviceKVOps(shape: KVShape, open: OpenDeviceGraph, graphs: DeviceKVGraphs): DeviceKVOps {
  const tensors = 2 * shape.layers;
  const outputs = Array.from({ length: tensors }, (_, i) => `out_${i}`);
  const sessions = new Map<string, Promise<ort.InferenceSession>>();
  const session = (key: string, make: () => Uint8Array) => {
    let s = sessions.get(key);
    if (s === undefined) {
      s = open(make(), key === "download" ? [] : outputs);
      sessions.set(key, s);
      s.catch(() => sessions.delete(key));
    }
    return s;
  };
  const held = new Set<ort.Tensor>();
  let heldBytes = 0;
  const hold = (ts: readonly ort.Tensor[]) => {
    for (const t of ts) {
      if (held.has(t)) continue;
      held.add(t);
      heldBytes += bytesOf(t);
    }
    ops.onHeld?.(heldBytes);
  };
  const int64s = (...values: number[]) => new ort.Tensor("int64", BigInt64Array.from(values, BigInt), [values.length]);

  const ops: DeviceKVOps = {
    shape,
    onHeld: undefined,
    async append(cache, present, row, from, count) {
      const s = await session(cache === undefined ? "slice" : "append", () => graphs.append(tensors, cache !== undefined));
      const feeds: Record<string, ort.Tensor> = { starts: int64s(row, from), ends: int64s(row + 1, from + count) };
      for (let i = 0; i < tensors; i++) {
        feeds[`present_${i}`] = present[i]!;
        if (cache !== undefined) feeds[`cache_${i}`] = cache[i]!;
      }
      const out = await s.run(feeds);
      const result = outputs.map((name) => out[name]!);
      hold(result);
      return result;
    },
    async gather(rows, lengths, past) {
      const s = await session(`gather/${rows.length}`, () => graphs.gather(tensors, rows.length));
      const feeds: Record<string, ort.Tensor> = {};
      rows.forEach((row, b) => {
        feeds[`pads_${b}`] = int64s(0, 0, 0, 0, 0, 0, past - lengths[b]!, 0);
        for (let i = 0; i < tensors; i++) feeds[`x_${i}_${b}`] = row[i]!;
      });
      const out = await s.run(feeds);
      const result = outputs.map((name) => out[name]!);
      hold(result);
      return result;
    },
    async download(tensor) {
      const s = await session("download", () => graphs.download());
      const out = await s.run({ x: tensor });
      return out.out!.data as Float32Array;
    },
    hold,
    dispose(ts) {
      for (const t of ts) {
        if (held.delete(t)) heldBytes -= bytesOf(t);
        t.dispose();
      }
      ops.onHeld?.(heldBytes);
    },
    get heldBytes() {
      return heldBytes;
    },
    get heldTensors() {
      return held.size;
    },
    async close() {
      const opened = await Promise.allSettled(sessions.values());
      sessions.clear();
      await Promise.all(opened.map((s) => (s.status === "fulfilled" ? s.value.release() : undefined)));
    },
  };
  return ops;
}

/** The graph builders (onnx-kv-graphs.ts), passed in so this file stays free of the proto writer. */
export interface DeviceKVGraphs {
  append(tensors: number, withCache: boolean): Uint8Array;
  gather(tensors: number, rows: number): Uint8Array;
  download(): Uint8Array;
}

/**
 * A forward's present key/values on the device, `[B, H_kv, P+S, D]` per tensor (or the S
 * current slots alone, `[B, H_kv, S, D]`, from forward slot `first`), shared by the
 * caches of the rows that store a slice of it: freed when the forward's caller and every cache
 * still to store from it have let it go.
 */
export class DevicePresent {
  private refs = 1;

  constructor(
    private readonly ops: DeviceKVOps,
    readonly tensors: readonly ort.Tensor[],
    /** The forward slot the tensors' first slot holds: 0, or P for a model's `present_new.*`. */
    readonly first = 0,
  ) {
    ops.hold(tensors);
  }

  retain(): void {
    this.refs++;
  }

  release(): void {
    if (this.refs <= 0) return;
    if (--this.refs === 0) this.ops.dispose(this.tensors);
  }
}

/**
 * One sequence's clean key/values on the device. `append` only records the slice to store (it
 * is called where the engine applies a forward, synchronously); the slices are copied into the
 * cache on the device by `settle`, which the runner calls before the cache's next forward.
 */
export class DeviceSequenceKV {
  length = 0;
  private tensors: ort.Tensor[] | undefined;
  private pending: { present: DevicePresent; row: number; from: number; count: number }[] = [];
  private disposed = false;

  constructor(readonly ops: DeviceKVOps) {}

  get shape(): KVShape {
    return this.ops.shape;
  }

  /** Records slots `[from, from + count)` of row `row` of `present` to be stored. */
  append(present: PresentKV, row: number, _total: number, from: number, count: number): void {
    if (count <= 0) return;
    if (!(present instanceof DevicePresent)) throw new Error("a device cache stores only key/values left on the device");
    if (this.disposed) throw new Error("key/value cache used after it was released");
    present.retain();
    this.pending.push({ present, row, from: from - present.first, count });
    this.length += count;
  }

  /**
   * Appends every slot of `source` (its recorded slices stored first), copied on the device by
   * the same append graph: a question's own cache starts from the state's this way (score.ts).
   */
  async appendCache(source: DeviceSequenceKV): Promise<void> {
    if (source.ops !== this.ops) throw new Error("key/value caches of different models");
    const from = await source.settle();
    const own = await this.settle();
    if (from === undefined || source.length === 0) return;
    if (this.disposed) throw new Error("key/value cache used after it was released");
    const extended = await this.ops.append(own, from, 0, 0, source.length);
    if (this.disposed) {
      this.ops.dispose(extended);
      throw new Error("key/value cache released while it was being stored");
    }
    if (own !== undefined) this.ops.dispose(own);
    this.tensors = extended;
    this.length += source.length;
  }

  /** The cache's tensors with every recorded slice stored (undefined while it is empty). */
  async settle(): Promise<readonly ort.Tensor[] | undefined> {
    while (this.pending.length > 0) {
      const next = this.pending[0]!;
      const extended = await this.ops.append(this.tensors, next.present.tensors, next.row, next.from, next.count);
      this.pending.shift();
      next.present.release();
      if (this.disposed) {
        this.ops.dispose(extended);
        throw new Error("key/value cache released while it was being stored");
      }
      if (this.tensors !== undefined) this.ops.dispose(this.tensors);
      this.tensors = extended;
    }
    return this.tensors;
  }

  /** Frees the cache's device memory and the presents it still held (the sequence left). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const p of this.pending.splice(0)) p.present.release();
    if (this.tensors !== undefined) this.ops.dispose(this.tensors);
    this.tensors = undefined;
  }
}

/**
 * The batched past of a forward over device caches. `resolve` gives the `[B, H_kv, past, D]`
 * tensors: one row's cache as it is when it alone fills the batch, else the rows gathered on
 * the device, kept by the DeviceBatchPast that made them while the rows and their lengths stay.
 */
export interface DevicePast {
  readonly device: true;
  readonly past: number;
  resolve(): Promise<readonly ort.Tensor[]>;
  /** Frees what resolve made for this forward only (a readout's batch). */
  done(): void;
}

export function isDevicePast(value: unknown): value is DevicePast {
  return typeof value === "object" && value !== null && (value as { device?: unknown }).device === true;
}

/** Builds DevicePasts for a step loop, keeping the last gathered batch between forwards. */
export class DeviceBatchPast {
  private key = "";
  private members: DeviceSequenceKV[] = [];
  private batch: ort.Tensor[] | undefined;

  constructor(private readonly ops: DeviceKVOps) {}

  /** The past of `rows`; `keep` false: the gathered batch is freed after the forward (not reused). */
  prepare(rows: readonly DeviceSequenceKV[], keep = true): DevicePast {
    let past = 0;
    for (const kv of rows) past = Math.max(past, kv.length);
    const lengths = rows.map((kv) => kv.length);
    const key = lengths.join(",");
    const resolve = async (): Promise<readonly ort.Tensor[]> => {
      const caches: (readonly ort.Tensor[])[] = [];
      for (const kv of rows) caches.push((await kv.settle()) ?? []);
      if (rows.length === 1 && caches[0]!.length > 0) return caches[0]!;
      if (past === 0) return this.empty(rows.length);
      const same = keep && key === this.key && rows.length === this.members.length && rows.every((kv, i) => kv === this.members[i]);
      if (same && this.batch !== undefined) return this.batch;
      this.reset();
      // A row with nothing stored yet is a zero-length slice of any present; an empty host tensor stands in.
      const filled = caches.map((c) => (c.length > 0 ? c : this.empty(1)));
      const batch = await this.ops.gather(filled, lengths, past);
      if (keep) {
        this.batch = batch;
        this.members = [...rows];
        this.key = key;
      } else {
        transient = batch;
      }
      return batch;
    };
    let transient: ort.Tensor[] | undefined;
    return {
      device: true,
      past,
      resolve,
      done: () => {
        if (transient !== undefined) this.ops.dispose(transient);
        transient = undefined;
      },
    };
  }

  private empty(rows: number): ort.Tensor[] {
    const { layers, heads, headDim } = this.ops.shape;
    return Array.from({ length: 2 * layers }, () => new ort.Tensor("float32", new Float32Array(0), [rows, heads, 0, headDim]));
  }

  /** Frees the kept batch (the rows changed, a forward failed, or the loop went idle). */
  reset(): void {
    if (this.batch !== undefined) this.ops.dispose(this.batch);
    this.batch = undefined;
    this.members = [];
    this.key = "";
  }
}
