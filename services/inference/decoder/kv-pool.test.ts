import { describe, expect, it } from "vitest";
import type { LayerKV } from "./forward.js";
import { BatchBuilder } from "./batch.js";
import { createKVCache, SequenceKV } from "./kv-cache.js";
import { KVStorePool, sizeClass } from "./kv-pool.js";

const SHAPE = { layers: 2, heads: 2, headDim: 3 };

/** A present of `slots` slots, `[1, H, slots, D]` per layer, every value `fill`. */
function present(slots: number, fill: number): LayerKV[] {
  const size = SHAPE.heads * slots * SHAPE.headDim;
  return Array.from({ length: SHAPE.layers }, () => ({ key: new Float32Array(size).fill(fill), value: new Float32Array(size).fill(fill) }));
}

describe("sizeClass", () => {
  it("rounds up to four classes per doubling, at least 16 slots", () => {
    expect([1, 16, 17, 20, 21, 33, 545, 640, 641, 1000].map(sizeClass)).toEqual([16, 16, 20, 20, 24, 40, 640, 640, 768, 1024]);
    for (let n = 1; n < 5000; n += 7) {
      expect(sizeClass(n)).toBeGreaterThanOrEqual(n);
      expect(sizeClass(n)).toBeLessThanOrEqual(Math.max(16, n * 1.25));
    }
  });
});

describe("KVStorePool", () => {
  it("gives a kept store back to a take of the same length, and fresh zeros otherwise", () => {
    const pool = new KVStorePool(4);
    const a = pool.take(2, 12);
    a[0]!.key.fill(7);
    pool.give(a);
    expect(pool.size).toBe(1);
    expect(pool.take(2, 24)[0]!.key.every((v) => v === 0)).toBe(true);
    const again = pool.take(2, 12);
    expect(again[0]!.key).toBe(a[0]!.key);
    expect(again[1]!.value).toBe(a[1]!.value);
    expect(pool.size).toBe(0);
  });

  it("makes a store's arrays views of one buffer, so that a worker borrows it in one piece", () => {
    const store = new KVStorePool(1).take(3, 10);
    const arrays = store.flatMap((l) => [l.key, l.value]);
    expect(new Set(arrays.map((a) => a.buffer)).size).toBe(1);
    expect(arrays.map((a) => a.byteOffset)).toEqual([0, 40, 80, 120, 160, 200]);
    expect(arrays.every((a) => a.length === 10)).toBe(true);
  });

  it("keeps at most `keep` stores, the oldest let go first", () => {
    const pool = new KVStorePool(2);
    const stores = [pool.take(1, 4), pool.take(1, 4), pool.take(1, 8)];
    for (const s of stores) pool.give(s);
    expect(pool.size).toBe(2);
    expect(pool.take(1, 4)[0]!.key).toBe(stores[1]![0]!.key);
    expect(pool.take(1, 8)[0]!.key).toBe(stores[2]![0]!.key);
    expect(pool.take(1, 4)[0]!.key).not.toBe(stores[0]![0]!.key);
  });

  it("drops a store whose arrays a worker still holds (detached) instead of keeping it", () => {
    const pool = new KVStorePool(4);
    const store = pool.take(2, 16);
    const buffer = store[1]!.value.buffer as ArrayBuffer;
    structuredClone(buffer, { transfer: [buffer] });
    pool.give(store);
    expect(pool.size).toBe(0);
  });

  it("keeps nothing with keep 0 (a model without a pool size)", () => {
    const pool = new KVStorePool(0);
    pool.give(pool.take(1, 4));
    expect(pool.size).toBe(0);
  });
});

describe("a SequenceKV on a pool", () => {
  const placement = (pool: KVStorePool) => ({ kvShape: SHAPE, hostPool: pool });

  it("takes its store from the pool and gives it back on dispose; a disposed cache cannot be used", () => {
    const pool = new KVStorePool(2);
    const a = createKVCache(placement(pool), 30, { sizeClass: true }) as SequenceKV;
    expect(a.storage().past).toBe(32);
    const arrays = a.storage().layers.map((l) => l.key);
    a.dispose();
    expect(pool.size).toBe(1);
    expect(() => a.append(present(1, 1), 0, 1, 0, 1)).toThrow();
    const b = createKVCache(placement(pool), 29, { sizeClass: true }) as SequenceKV;
    expect(b.storage().layers.map((l) => l.key)).toEqual(arrays);
    expect(b.storage().layers[0]!.key).toBe(arrays[0]);
  });

  it("a reused store's old values are never read: the batch past and the lone row's mask see only the new cache's slots", () => {
    const pool = new KVStorePool(2);
    const old = createKVCache(placement(pool), 20, { sizeClass: true }) as SequenceKV;
    old.append(present(20, 9), 0, 20, 0, 20);
    old.dispose();
    const kv = createKVCache(placement(pool), 18, { sizeClass: true }) as SequenceKV;
    expect(kv.storage().layers[0]!.key[0]).toBe(9); // the same memory, as it was left
    kv.append(present(3, 1), 0, 3, 0, 3);

    // Two rows: the batch past is rebuilt from each cache's own slots; slots past a row's length are zeros.
    const other = new SequenceKV(SHAPE, 4);
    other.append(present(4, 2), 0, 4, 0, 4);
    const batch = new BatchBuilder(SHAPE, 1, 0).build([
      { kv, tokens: [5] },
      { kv: other, tokens: [6] },
    ]);
    const layers = batch.pastKeyValues as LayerKV[];
    const P = batch.past;
    for (let h = 0; h < SHAPE.heads; h++) {
      const row0 = layers[0]!.key.subarray(h * P * 3, (h + 1) * P * 3);
      expect([...row0]).toEqual([...new Array(3 * 3).fill(1), ...new Array((P - 3) * 3).fill(0)]);
    }

    // One row (the step loop's): the cache's own arrays, every slot past its length blocked.
    const lone = new BatchBuilder(SHAPE, 1, 0, { roomToGrow: true }).build([{ kv, tokens: [5] }]);
    expect(lone.past).toBe(20);
    const mask = lone.attentionMask;
    expect([...mask.subarray(0, 3)]).toEqual([0, 0, 0]);
    expect(mask.subarray(3, 20).every((v) => v === -1e9)).toBe(true);
    expect(mask[20]).toBe(0);
  });

  it("growing takes a larger store from the pool and gives the smaller one back", () => {
    const pool = new KVStorePool(4);
    const kv = createKVCache(placement(pool), 16, { sizeClass: true }) as SequenceKV;
    kv.append(present(16, 3), 0, 16, 0, 16);
    kv.append(present(1, 4), 0, 1, 0, 1);
    expect(kv.storage().past).toBe(32);
    expect(pool.size).toBe(1);
    const layers = kv.layersOfLength();
    const head0 = layers[0]!.key.subarray(0, 17 * 3);
    expect([...head0]).toEqual([...new Array(16 * 3).fill(3), 4, 4, 4]);
  });
});
