// The readout's own input builder against the engine's BatchBuilder: the very same tensors,
// so the readout's logits stay those of the generic path to the last bit.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BatchBuilder } from "../decoder/batch.js";
import type { KVShape, LayerKV } from "../decoder/forward.js";
import { SequenceKV } from "../decoder/kv-cache.js";
import { copiedPast, PastScratch, readoutInputs } from "./score-batch.js";

const shape: KVShape = { layers: 2, heads: 2, headDim: 3 };
const BLOCK = 4;
const PAD = 99;

/** A prefill's present key/values for `length` slots: `[1, H, length, D]` per layer, distinct values. */
function present(length: number): LayerKV[] {
  const size = shape.heads * length * shape.headDim;
  return Array.from({ length: shape.layers }, (_, l) => ({
    key: Float32Array.from({ length: size }, (_, i) => l * 1000 + i + 0.25),
    value: Float32Array.from({ length: size }, (_, i) => -(l * 1000 + i) - 0.5),
  }));
}

describe("readoutInputs", () => {
  it("gives the tensors BatchBuilder gives for the same rows over the same past", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 }),
        fc.array(fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 11 }), { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        (blocks, rows, withScratch) => {
          const length = blocks * BLOCK;
          const layers = present(length);
          const kv = new SequenceKV(shape, Math.max(length, 1));
          kv.append(layers, 0, length, 0, length);
          const want = new BatchBuilder(shape, BLOCK, PAD).build(rows.map((tokens) => ({ kv, tokens })));
          const scratch = withScratch ? new PastScratch().take(shape.layers, 64 * rows.length * length + 7) : undefined;
          const got = readoutInputs(
            rows.map((tokens) => ({ tokens })),
            { layers, length },
            shape,
            BLOCK,
            PAD,
            copiedPast(scratch),
          );
          expect({ batch: got.batch, seq: got.seq, past: got.past }).toEqual({ batch: want.batch, seq: want.seq, past: want.past });
          expect(got.inputIds).toEqual(want.inputIds);
          expect(got.positionIds).toEqual(want.positionIds);
          expect(got.attentionMask).toEqual(want.attentionMask);
          (got.pastKeyValues as LayerKV[]).forEach((layer, l) => {
            expect(layer.key).toEqual((want.pastKeyValues as LayerKV[])[l]!.key);
            expect(layer.value).toEqual((want.pastKeyValues as LayerKV[])[l]!.value);
          });
        },
      ),
    );
  });
});

describe("PastScratch", () => {
  it("lends its buffers to one request at a time and keeps them for the next", () => {
    const scratch = new PastScratch();
    const first = scratch.take(2, 100)!;
    expect(first).toHaveLength(2);
    expect(first[0]!.key.length).toBeGreaterThanOrEqual(100);
    expect(scratch.take(2, 100)).toBeUndefined(); // held
    scratch.release();
    expect(scratch.take(2, 50)).toBe(first); // kept, large enough
    scratch.release();
    const bigger = scratch.take(2, 1000)!;
    expect(bigger[0]!.key.length).toBeGreaterThanOrEqual(1000);
    scratch.release();
  });
});
