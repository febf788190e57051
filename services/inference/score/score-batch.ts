import { BLOCKED } from "../decoder/batch.js";
import { DeviceBatchPast, type DevicePast, type DeviceSequenceKV } from "../decoder/device-kv.js";
import type { ForwardInputs, KVShape, LayerKV } from "../decoder/forward.js";
import type { KVStorePool } from "../decoder/kv-pool.js";
import { renewSharedRows, repeatedRowFeed } from "../onnx/onnx-worker-session.js";

/** The past every readout row continues: the prefix's complete blocks, `[1, H_kv, length, D]` per layer. */
export interface ReadoutPast {
  layers: readonly LayerKV[];
  length: number;
}

/** How long an idle scratch is kept before it is let go. */
const SCRATCH_IDLE_MS = 30_000;

/**
 * Buffers for the batched past of readout forwards made on this thread (copiedPast), kept
 * between requests. That tensor is the prefix's key/values once per row (16 questions on a
 * 1,000-token state of the bundled model: 134 MB); allocating it afresh for every request
 * cost more than filling it — the pages are new each time — and left the same amount to the
 * garbage collector. One request at a time uses the scratch (others allocate their own); it
 * is dropped after a while unused.
 */
export class PastScratch {
  private layers: LayerKV[] = [];
  private busy = false;
  private timer: NodeJS.Timeout | undefined;

  /** Buffers of at least `floats` per key and per value tensor, or undefined while another request holds them. */
  take(layerCount: number, floats: number): LayerKV[] | undefined {
    if (this.busy) return undefined;
    this.busy = true;
    clearTimeout(this.timer);
    if (this.layers.length !== layerCount || this.layers[0]!.key.length < floats) {
      this.layers = [];
      this.layers = Array.from({ length: layerCount }, () => ({ key: new Float32Array(floats), value: new Float32Array(floats) }));
    }
    return this.layers;
  }

  release(): void {
    this.busy = false;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.busy) this.layers = [];
    }, SCRATCH_IDLE_MS);
    this.timer.unref();
  }
}

/**
 * Makes the batched past of a readout forward, `[B, H_kv, P, D]` per layer: `rows` rows that all
 * continue `past`. ONNX Runtime cannot broadcast a past across the batch, so each row needs it.
 */
export type BatchedPast = (past: ReadoutPast, rows: number, shape: KVShape) => LayerKV[] | DevicePast;

/** The past as `rows` copies of a cache on the device, gathered there for one forward and then freed. */
export function devicePast(kv: DeviceSequenceKV): BatchedPast {
  return (_past, rows) => new DeviceBatchPast(kv.ops).prepare(new Array<DeviceSequenceKV>(rows).fill(kv), false);
}

/**
 * The past copied once per row on this thread, into `scratch` when given: for a session on
 * this thread, which reads the tensors where they are.
 */
export function copiedPast(scratch?: readonly LayerKV[]): BatchedPast {
  return (past, B, shape) => {
    const size = shape.heads * past.length * shape.headDim;
    return past.layers.map((layer, l): LayerKV => {
      const key = scratch?.[l]?.key.subarray(0, B * size) ?? new Float32Array(B * size);
      const value = scratch?.[l]?.value.subarray(0, B * size) ?? new Float32Array(B * size);
      const srcKey = layer.key.subarray(0, size);
      const srcValue = layer.value.subarray(0, size);
      for (let b = 0; b < B; b++) {
        key.set(srcKey, b * size);
        value.set(srcValue, b * size);
      }
      return { key, value };
    });
  };
}

/**
 * The past as feeds a worker-thread session materialises itself (repeatedRowFeed): only the one
 * row crosses to the worker, which writes the copies into a buffer it keeps, off the event loop.
 * With the past in shared memory (sharedPast) nothing is copied on this thread at all.
 */
export const repeatedPast: BatchedPast = (past, B, shape) => {
  const size = shape.heads * past.length * shape.headDim;
  return past.layers.map((layer) => ({
    key: repeatedRowFeed(layer.key.subarray(0, size), B),
    value: repeatedRowFeed(layer.value.subarray(0, size), B),
  }));
};

/**
 * `past` copied once into shared memory, which the worker reads in place on every forward and
 * never changed after: the worker keeps the rows it wrote from them between forwards. The memory
 * is a store from `pool` (one SharedArrayBuffer), to give back once the readout's forwards are
 * done: fresh shared memory for a 1,400-token state at 1.7B (324 MB) cost about a second of page
 * faults per decision here. A reused store's rows get new keys (renewSharedRows).
 */
export function sharedPast(past: ReadoutPast, shape: KVShape, pool: KVStorePool): ReadoutPast {
  const size = shape.heads * past.length * shape.headDim;
  const store = pool.take(shape.layers, size);
  const buffer = store[0]?.key.buffer;
  if (buffer instanceof SharedArrayBuffer) renewSharedRows(buffer);
  past.layers.forEach((layer, l) => {
    store[l]!.key.set(layer.key.subarray(0, size));
    store[l]!.value.set(layer.value.subarray(0, size));
  });
  return { layers: store, length: past.length };
}

/**
 * The inputs of a readout forward: each row in a batch row of its own, its tokens right after
 * the shared past, padded to the longest row. The same inputs as BatchBuilder.build gives for
 * these rows over a SequenceKV holding `past` (score-batch.test.ts checks it), built without
 * copying the past into a cache first; `batchedPast` makes the past's rows (copiedPast by default).
 */
export function readoutInputs(
  rows: readonly { tokens: readonly number[] }[],
  past: ReadoutPast,
  shape: KVShape,
  blockSize: number,
  padTokenId: number,
  batchedPast: BatchedPast = copiedPast(),
): ForwardInputs {
  const B = rows.length;
  const P = past.length;
  let S = 0;
  for (const row of rows) S = Math.max(S, row.tokens.length);
  const width = P + S;
  const inputIds = new BigInt64Array(B * S).fill(BigInt(padTokenId));
  const positionIds = new BigInt64Array(B * S);
  const attentionMask = new Float32Array(B * S * width).fill(BLOCKED);
  rows.forEach((row, b) => {
    const len = row.tokens.length;
    for (let i = 0; i < len; i++) {
      inputIds[b * S + i] = BigInt(row.tokens[i]!);
      positionIds[b * S + i] = BigInt(P + i);
      // Block-causal by absolute position: the whole past, and this row up to the end of the query's block.
      const base = (b * S + i) * width;
      const blockEnd = (Math.floor((P + i) / blockSize) + 1) * blockSize;
      attentionMask.fill(0, base, base + P);
      attentionMask.fill(0, base + P, base + P + Math.min(len, blockEnd - P));
    }
  });
  return { batch: B, seq: S, past: P, inputIds, positionIds, attentionMask, pastKeyValues: batchedPast(past, B, shape) };
}
