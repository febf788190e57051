import type { LayerKV } from "./forward.js";

/** How long stores are kept unused before they are let go. */
const IDLE_MS = 30_000;
/** The smallest size class, in slots. */
const MIN_CLASS = 16;

/**
 * A cache's capacity rounded up to its size class: four classes per doubling (16, 20, 24, 28,
 * 32, 40, ...), so that replies of nearby lengths take each other's stores from the pool, and a
 * store is at most a quarter larger than asked.
 */
export function sizeClass(slots: number): number {
  if (slots <= MIN_CLASS) return MIN_CLASS;
  const step = 2 ** Math.floor(Math.log2(slots)) / 4;
  return Math.ceil(slots / step) * step;
}

/**
 * A store of `layers` key and value arrays of `length` floats each (zeros), all views of one
 * buffer: the unit a worker session keeps a copy of for a lone row (`mirror`, worker-mirrors.ts),
 * and crossing threads in one piece when lent (one buffer took about half the time of 56
 * separate ones: V8 collects garbage on each side for what arrives, bench/cpu-peer.md).
 */
export function newStore(layers: number, length: number, shared = false): LayerKV[] {
  const bytes = layers * 2 * length * Float32Array.BYTES_PER_ELEMENT;
  const buffer = shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
  const view = (i: number) => new Float32Array(buffer, i * length * Float32Array.BYTES_PER_ELEMENT, length);
  return Array.from({ length: layers }, (_, l) => ({ key: view(2 * l), value: view(2 * l + 1) }));
}

/**
 * Host key/value stores (per layer `[H_kv, capacity, D]`, a SequenceKV's arrays) kept for the
 * next cache of the same size when a cache is disposed, as llama.cpp keeps its one KV buffer and
 * vLLM its block pool. Fresh memory is paid for in page faults on first write, and those are
 * slow where the host backs guest memory lazily: 117 MB, one 512-token prompt's key/values at
 * 1.7B, took 0.42 s to write fresh and 4 ms warm on the shared CPU (bench/cpu-peer.md). A reused
 * store holds the previous cache's values past the new one's length; those slots are never read
 * (the attention mask blocks every slot past a cache's length, and caches copy out only their
 * own slots).
 *
 * At most `keep` stores are kept, the oldest let go first, and all of them once the pool has
 * been unused for IDLE_MS.
 */
export class KVStorePool {
  /** Idle stores by the length of their arrays, oldest first. */
  private readonly idle = new Map<number, LayerKV[][]>();
  private count = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly keep: number,
    /** Stores in shared memory (a decision's past that a worker reads in place: score-batch.ts). */
    private readonly shared = false,
  ) {}

  /** A store of `layers` key and value arrays of `length` floats each: a kept one, else fresh (zeros). */
  take(layers: number, length: number): LayerKV[] {
    const stores = this.idle.get(length);
    const kept = stores?.pop();
    if (kept !== undefined) {
      this.count--;
      if (stores!.length === 0) this.idle.delete(length);
      if (kept.length === layers) return kept;
    }
    return newStore(layers, length, this.shared);
  }

  /**
   * Keeps `store` for a later `take`. Its arrays must be nobody's any more. A store with an array
   * that is not all there (one a worker session still borrows, or lost with a worker: empty) is
   * dropped, not kept.
   */
  give(store: readonly LayerKV[]): void {
    const length = store[0]?.key.length ?? 0;
    if (this.keep <= 0 || length === 0) return;
    if (!store.every((l) => l.key.length === length && l.value.length === length)) return;
    const stores = this.idle.get(length) ?? [];
    stores.push(store.map(({ key, value }) => ({ key, value })));
    this.idle.set(length, stores);
    this.count++;
    while (this.count > this.keep) this.dropOldest();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.clear(), IDLE_MS);
    this.timer.unref();
  }

  /** Stores kept now (for tests and metrics). */
  get size(): number {
    return this.count;
  }

  clear(): void {
    clearTimeout(this.timer);
    this.idle.clear();
    this.count = 0;
  }

  private dropOldest(): void {
    // Map order is insertion order of the lengths: the first length's first store is among the oldest.
    const [length, stores] = this.idle.entries().next().value as [number, LayerKV[][]];
    stores.shift();
    this.count--;
    if (stores.length === 0) this.idle.delete(length);
  }
}
