/**
 * One row's KV cache of a canvas model and the batched feeds built from rows of different
 * lengths. A layer's tensor is `[kv, P, d]` flat (batch 1); sliding layers keep their last
 * `sliding_window - 1` positions (docs/model-contract.md, "encoder.onnx").
 */
import * as ort from "onnxruntime-node";
import { handOver } from "../../onnx/onnx-worker-session.js";
import type { CanvasLayer } from "./canvas-model.js";

export const NEG = -1e9;

/**
 * The denoiser's int64 `[B, K]` input: the canvas positions of each row whose logits (and next
 * self-conditioning embeddings) the head computes; the outputs are `[B, K, .]`. Denoising feeds
 * every position, a decision's readout position 0 only (docs/model-contract.md, "denoiser.onnx").
 */
export const LOGITS_POSITIONS = "logits_positions";

/** The LOGITS_POSITIONS feed: the same canvas positions for each of `rows` rows. */
export function logitsPositionsFeed(rows: number, positions: readonly number[]): ort.Tensor {
  const K = positions.length;
  const data = new BigInt64Array(rows * K);
  for (let b = 0; b < rows; b++) for (let k = 0; k < K; k++) data[b * K + k] = BigInt(positions[k]!);
  return new ort.Tensor("int64", data, [rows, K]);
}

/** Every position of a canvas of `length`, in order. */
export function everyPosition(length: number): number[] {
  return Array.from({ length }, (_, i) => i);
}

export interface LayerCache {
  data: [Float32Array, Float32Array];
  /** Positions held (P_l). */
  length: number;
}

export interface RowCache {
  layers: LayerCache[];
  /** Absolute positions encoded so far (the full layers hold all of them). */
  length: number;
}

export function emptyCache(layers: readonly CanvasLayer[]): RowCache {
  return { layers: layers.map(() => ({ data: [new Float32Array(0), new Float32Array(0)], length: 0 })), length: 0 };
}

/**
 * A cache another prompt can continue without touching this one: an encoder call replaces a
 * layer's arrays (storePresents) and never writes into them, so the arrays are shared.
 */
export function copyCache(cache: RowCache): RowCache {
  return { layers: cache.layers.map((l) => ({ data: [l.data[0], l.data[1]], length: l.length })), length: cache.length };
}

/** The last `keep` positions of a `[kv, T, d]` tensor. */
export function lastPositions(x: Float32Array, kv: number, total: number, d: number, keep: number): Float32Array {
  if (keep >= total) return x;
  const out = new Float32Array(kv * keep * d);
  for (let h = 0; h < kv; h++) out.set(x.subarray((h * total + total - keep) * d, (h * total + total) * d), h * keep * d);
  return out;
}

/** Stores an encoder's presents (`[1, kv, P+S, d]`), bounding the sliding layers. */
export function storePresents(
  cache: RowCache,
  layers: readonly CanvasLayer[],
  window: number,
  presents: Float32Array[],
  added: number,
): void {
  layers.forEach((layer, l) => {
    const total = cache.layers[l]!.length + added;
    const keep = layer.type === "sliding_attention" ? Math.min(total, window - 1) : total;
    const cut = (x: Float32Array) => lastPositions(x, layer.kvHeads, total, layer.headDim, keep);
    cache.layers[l] = { data: [cut(presents[2 * l]!), cut(presents[2 * l + 1]!)], length: keep };
  });
  cache.length += added;
}

/** Absolute key positions [from, to) a query sees. */
export type KeySpan = readonly [number, number];

/** Every key: the denoiser's canvas and a readout see the whole past and the whole canvas. */
export const EVERY_KEY: readonly KeySpan[] = [[0, Number.POSITIVE_INFINITY]];

function pastLength(caches: readonly RowCache[], l: number): number {
  return Math.max(0, ...caches.map((c) => c.layers[l]!.length));
}

/**
 * The past tensors of a batch (each row right-padded to the longest, padded slots blocked by
 * the masks) and the two additive masks for `queries` new positions per row.
 * `allowed(kind, queryPos)` gives the spans [from, to) of absolute key positions a query sees
 * (spans may overlap; a mask row is filled span by span, not key by key, so a prompt of
 * thousands of tokens costs the event loop little); the new positions (the last `queries` keys)
 * are always real and follow the same rule. A mask is built only where the
 * graph declares it (`inputNames`): a pattern without sliding (or full) layers has no use for
 * its mask, and the exporter drops a mask whose every use is dead code (the encoder's full mask
 * where the only full layer is the last: that layer's attention output is never read).
 * Every array is fresh and handed over (onnx-worker-session.ts): a session on a worker thread
 * takes it without a copy on the event loop, and it is empty once run; count its bytes before.
 */
export function batchFeeds(
  caches: readonly RowCache[],
  layers: readonly CanvasLayer[],
  queries: number,
  allowed: (kind: "full" | "sliding", queryPos: number) => readonly KeySpan[],
  inputNames: readonly string[],
): Record<string, ort.Tensor> {
  const B = caches.length;
  const feeds: Record<string, ort.Tensor> = {};
  layers.forEach((layer, l) => {
    const P = pastLength(caches, l);
    const { kvHeads: kv, headDim: d } = layer;
    for (const j of [0, 1] as const) {
      const out = new Float32Array(B * kv * P * d);
      caches.forEach((c, b) => {
        const src = c.layers[l]!.data[j];
        const p = c.layers[l]!.length;
        for (let h = 0; h < kv; h++) out.set(src.subarray(h * p * d, (h + 1) * p * d), (b * kv + h) * P * d);
      });
      feeds[`past_key_values.${l}.${j === 0 ? "key" : "value"}`] = new ort.Tensor("float32", handOver(out), [B, kv, P, d]);
    }
  });
  for (const kind of ["full", "sliding"] as const) {
    if (!inputNames.includes(`${kind}_attention_mask`)) continue;
    const l = layers.findIndex((x) => x.type === (kind === "full" ? "full_attention" : "sliding_attention"));
    const P = l < 0 ? 0 : pastLength(caches, l);
    const T = P + queries;
    const mask = new Float32Array(B * queries * T).fill(NEG);
    caches.forEach((c, b) => {
      const held = l < 0 ? 0 : c.layers[l]!.length;
      const first = c.length - held; // absolute position of the row's first held key
      for (let q = 0; q < queries; q++) {
        const base = (b * queries + q) * T;
        for (const [from, to] of allowed(kind, c.length + q)) {
          // The held keys' columns, then the new positions' (after the padded past).
          const heldFrom = Math.max(from, first);
          const heldTo = Math.min(to, c.length);
          if (heldFrom < heldTo) mask.fill(0, base + heldFrom - first, base + heldTo - first);
          const newFrom = Math.max(from, c.length);
          const newTo = Math.min(to, c.length + queries);
          if (newFrom < newTo) mask.fill(0, base + P + newFrom - c.length, base + P + newTo - c.length);
        }
      }
    });
    feeds[`${kind}_attention_mask`] = new ort.Tensor("float32", handOver(mask), [B, 1, queries, T]);
  }
  return feeds;
}
