import { DeviceBatchPast, type DeviceKVOps, DevicePresent, DeviceSequenceKV, type DevicePast } from "./device-kv.js";
import { type KVShape, type LayerKV, type PresentKV, presentSlots } from "./forward.js";
import { type KVStorePool, newStore, sizeClass } from "./kv-pool.js";
import type { MirrorPatch, MirrorSource } from "../onnx/worker-mirrors.js";

/**
 * The room a kept batch's past gets when its rows outgrow it: a quarter more slots (at least
 * GROWTH_MIN), so the whole past is copied once per 25% of growth, not once per step, and a
 * forward attends to at most 25% blocked slots.
 */
const GROWTH = 0.25;
const GROWTH_MIN = 16;

/**
 * The slots a sequence's cache holds beyond its prompt from the start: its reply's (at most 256;
 * at least 4 blocks). Growing a cache copies it all into fresh memory, which cost 0.8 s at 1.7B
 * on the shared CPU (bench/cpu-peer.md), so an autoregressive reply should not grow it early.
 */
export function replyRoom(maxTokens: number, blockSize: number): number {
  return Math.max(4 * blockSize, Math.min(maxTokens + blockSize, 256));
}

/** A sequence's key/value cache: in host memory, or on the device (device-kv.ts). */
export type KVCache = SequenceKV | DeviceSequenceKV;

/** Where a model's caches live: its key/value shape, and the device operations when they stay on the device. */
export interface KVPlacement {
  kvShape: KVShape;
  /** Set when the key/values stay on the device (WebGPU, device-kv.ts): caches are made there. */
  deviceKV?: DeviceKVOps;
  /** Where host caches take their stores from and give them back when disposed (kv-pool.ts). */
  hostPool?: KVStorePool;
}

/**
 * A cache on the device when the model's key/values live there, else in host memory. `sizeClass`
 * rounds a host cache's capacity up to its size class (kv-pool.ts), so that the pool has a store
 * for the next reply of about the same length; a cache whose arrays are fed whole when exactly
 * full (a decision's state: layersOfLength) asks for its exact length instead.
 */
export function createKVCache(model: KVPlacement, initialCapacity: number, options: { sizeClass?: boolean } = {}): KVCache {
  if (model.deviceKV !== undefined) return new DeviceSequenceKV(model.deviceKV);
  const capacity = options.sizeClass === true ? sizeClass(initialCapacity) : initialCapacity;
  return new SequenceKV(model.kvShape, capacity, model.hostPool);
}

/**
 * The clean key/values of one sequence, per layer `[H_kv, capacity, D]`. Only whole
 * committed blocks (and the prompt's complete blocks) are ever stored, so the cache is
 * exact and never rewritten.
 */
export class SequenceKV {
  length = 0;
  private capacity: number;
  /** Per layer `[H_kv, capacity, D]`: LayerKV objects, so that a forward that borrows the arrays (`storage`) puts them back in place. */
  private store: LayerKV[];
  /** The store as a worker session's mirrored feed (storage): one per store this cache holds. */
  private mirror: MirrorSource | undefined;

  constructor(
    readonly shape: KVShape,
    initialCapacity = 256,
    /** Where the store comes from and goes back to on dispose (kv-pool.ts); else fresh arrays, left to the GC. */
    private readonly pool?: KVStorePool,
  ) {
    this.capacity = Math.max(1, initialCapacity);
    this.store = this.takeStore(this.capacity);
  }

  /**
   * Appends slots `[from, from + count)` of row `row` of a forward's present key/values, whose
   * slots number `total` (`P + S`); a present of the current slots alone holds those from its `first`.
   */
  append(present: PresentKV, row: number, total: number, from: number, count: number): void {
    if (count <= 0) return;
    if (present instanceof DevicePresent) throw new Error("a host cache cannot store key/values left on the device");
    const { layers, first } = presentSlots(present);
    if (from < first) throw new Error(`slot ${from} is not in a present of slots from ${first}`);
    const slots = total - first;
    this.reserve(this.length + count);
    const { heads: H, headDim: D } = this.shape;
    for (let l = 0; l < layers.length; l++) {
      const src = layers[l]!;
      for (let h = 0; h < H; h++) {
        const s = ((row * H + h) * slots + from - first) * D;
        const d = (h * this.capacity + this.length) * D;
        this.store[l]!.key.set(src.key.subarray(s, s + count * D), d);
        this.store[l]!.value.set(src.value.subarray(s, s + count * D), d);
      }
    }
    this.length += count;
  }

  /**
   * The cache as `[1, H_kv, length, D]` per layer: the stored arrays themselves when the cache is
   * exactly full (made with its final length as capacity), else compact copies.
   */
  layersOfLength(): LayerKV[] {
    if (this.length === this.capacity) return this.store.map(({ key, value }) => ({ key, value }));
    const size = this.shape.heads * this.length * this.shape.headDim;
    const layers = this.store.map(() => ({ key: new Float32Array(size), value: new Float32Array(size) }));
    this.copyInto(layers, 0, this.length);
    return layers;
  }

  /** Copies slots `[from, to)` into row `row` of batch tensors `[B, H_kv, past, D]`. */
  copyInto(dst: readonly LayerKV[], row: number, past: number, from = 0, to = this.length): void {
    if (to <= from) return;
    const { heads: H, headDim: D } = this.shape;
    for (let l = 0; l < dst.length; l++) {
      for (let h = 0; h < H; h++) {
        const s = (h * this.capacity + from) * D;
        const d = ((row * H + h) * past + from) * D;
        dst[l]!.key.set(this.store[l]!.key.subarray(s, s + (to - from) * D), d);
        dst[l]!.value.set(this.store[l]!.value.subarray(s, s + (to - from) * D), d);
      }
    }
  }

  /**
   * The cache's own arrays as a one-row past of `capacity` slots, `[1, H_kv, capacity, D]`: fed
   * with the slots past `length` blocked by the mask, nothing is copied. A worker session keeps a
   * copy of the store (`mirror`), sent only the slots appended since; when it lends the arrays
   * instead, they come back into this cache's entries.
   */
  storage(): { past: number; layers: LayerKV[]; mirror?: MirrorSource } {
    this.mirror ??= this.mirrorOfStore();
    return { past: this.capacity, layers: this.store, ...(this.mirror !== undefined ? { mirror: this.mirror } : {}) };
  }

  /**
   * The store as a mirrored feed (worker-mirrors.ts): its buffer, and the slots appended since a
   * position (the cache only appends). A store is views of one buffer (newStore); undefined for
   * one in shared memory, which a worker reads in place.
   */
  private mirrorOfStore(): MirrorSource | undefined {
    const store = this.store;
    if (!(store[0]?.key.buffer instanceof ArrayBuffer)) return undefined;
    return {
      // A store lent for a run comes back as new views of a new ArrayBuffer object (same memory).
      get buffer() {
        return store[0]!.key.buffer as ArrayBuffer;
      },
      changes: (since, most) => {
        const mine = store === this.store;
        const slots = mine ? Math.max(0, this.length - since) : 0;
        const floats = slots * store.length * 2 * this.shape.heads * this.shape.headDim;
        return { patch: floats > most ? undefined : this.slotsSince(since, slots), upTo: mine ? this.length : since };
      },
    };
  }

  /** Slots `[since, since + slots)` of every layer and head of the store. */
  private slotsSince(since: number, slots: number): MirrorPatch {
    const { heads: H, headDim: D } = this.shape;
    const run = slots * D;
    const runs = run > 0 ? this.store.length * 2 * H : 0;
    const starts = new Uint32Array(runs);
    const data = new Float32Array(runs * run);
    let i = 0;
    for (let l = 0; l < this.store.length && runs > 0; l++) {
      for (const view of [this.store[l]!.key, this.store[l]!.value]) {
        for (let h = 0; h < H; h++, i++) {
          const s = (h * this.capacity + since) * D;
          starts[i] = view.byteOffset / Float32Array.BYTES_PER_ELEMENT + s;
          data.set(view.subarray(s, s + run), i * run);
        }
      }
    }
    return { starts, run, data };
  }

  /**
   * Gives the store back to the pool (when the cache has one). The cache must not be used after:
   * it is left without arrays, so a use fails rather than touching a store another cache took.
   */
  dispose(): void {
    const store = this.store;
    this.store = [];
    this.mirror = undefined;
    this.capacity = 0;
    this.length = 0;
    if (store.length > 0) this.pool?.give(store);
  }

  private takeStore(capacity: number): LayerKV[] {
    const { layers, heads, headDim } = this.shape;
    const size = heads * capacity * headDim;
    return this.pool !== undefined ? this.pool.take(layers, size) : newStore(layers, size);
  }

  private reserve(needed: number): void {
    if (this.store.length === 0) throw new Error("the key/value cache was disposed");
    if (needed <= this.capacity) return;
    let capacity = this.capacity;
    while (capacity < needed) capacity *= 2;
    if (this.pool !== undefined) capacity = sizeClass(capacity);
    const { heads: H, headDim: D } = this.shape;
    const next = this.takeStore(capacity);
    const copy = (old: Float32Array, to: Float32Array) => {
      for (let h = 0; h < H; h++) {
        to.set(old.subarray(h * this.capacity * D, (h * this.capacity + this.length) * D), h * capacity * D);
      }
    };
    this.store.forEach((layer, l) => {
      copy(layer.key, next[l]!.key);
      copy(layer.value, next[l]!.value);
    });
    this.pool?.give(this.store);
    this.store = next;
    this.mirror = undefined;
    this.capacity = capacity;
  }
}

/**
 * The batched past key/values fed to a forward. Between steps it is kept and patched in
 * place: a row that committed a block (or a token) gets only its new slots copied. The tensor
 * is rebuilt only when the rows change, or when the longest past outgrows its slots; a batch
 * of the same rows that grew is rebuilt with room to grow (GROWTH) where `roomToGrow` is set (the
 * scheduler's step loop), so that a decode does not copy its whole past every step. The fed past
 * is then longer than the longest row: slots past a row's length are zeros, blocked by the
 * attention mask like any shorter row's (the logits may differ from an exact past's in the last
 * bits: the attention sums run over more, zero, terms; a decision's chunks keep exact pasts).
 */
export class BatchPast {
  private members: SequenceKV[] = [];
  private lengths: number[] = [];
  private past = -1;
  private layers: LayerKV[] = [];
  private device: DeviceBatchPast | undefined;

  constructor(
    private readonly shape: KVShape,
    private readonly roomToGrow = false,
  ) {}

  prepare(rows: readonly KVCache[]): { past: number; layers: LayerKV[] | DevicePast; mirror?: MirrorSource } {
    if (rows.some((kv) => kv instanceof DeviceSequenceKV)) {
      if (!rows.every((kv) => kv instanceof DeviceSequenceKV)) throw new Error("a batch mixes host and device caches");
      this.device ??= new DeviceBatchPast(rows[0]!.ops);
      const past = this.device.prepare(rows);
      return { past: past.past, layers: past };
    }
    return this.prepareHost(rows as readonly SequenceKV[]);
  }

  private prepareHost(rows: readonly SequenceKV[]): { past: number; layers: LayerKV[]; mirror?: MirrorSource } {
    if (this.roomToGrow && rows.length === 1) {
      // A lone row (a decode's usual batch) is fed its cache's own arrays, spare slots blocked: no
      // copy; a worker session keeps a copy of them and is sent each step's new slots (`mirror`).
      this.reset();
      return rows[0]!.storage();
    }
    let longest = 0;
    for (const kv of rows) longest = Math.max(longest, kv.length);
    const sameRows =
      rows.length === this.members.length &&
      rows.every((kv, i) => kv === this.members[i] && kv.length >= this.lengths[i]!) &&
      this.intact();
    if (sameRows && longest <= this.past) {
      rows.forEach((kv, b) => {
        if (kv.length !== this.lengths[b]) kv.copyInto(this.layers, b, this.past, this.lengths[b], kv.length);
      });
    } else {
      // A fresh batch (a prefill, new rows) is exactly as long as its longest row.
      const past = sameRows && this.roomToGrow ? longest + Math.max(GROWTH_MIN, Math.ceil(longest * GROWTH)) : longest;
      const { layers: L, heads: H, headDim: D } = this.shape;
      const size = rows.length * H * past * D;
      this.layers = Array.from({ length: L }, () => ({ key: new Float32Array(size), value: new Float32Array(size) }));
      rows.forEach((kv, b) => {
        kv.copyInto(this.layers, b, past);
      });
      this.members = [...rows];
      this.past = past;
    }
    this.lengths = rows.map((kv) => kv.length);
    return { past: this.past, layers: this.layers };
  }

  /**
   * Whether the kept tensors are all there: a worker session borrows them for a forward
   * (`pastKept`), and one that died with them never gave them back (they are then empty).
   */
  private intact(): boolean {
    const size = this.members.length * this.shape.heads * this.past * this.shape.headDim;
    return this.layers.every((layer) => layer.key.length === size && layer.value.length === size);
  }

  /** Forget the kept tensors (after a failed forward, whose rows are then run one by one). */
  reset(): void {
    this.device?.reset();
    this.members = [];
    this.lengths = [];
    this.past = -1;
    this.layers = [];
  }
}
