// The host key/value cache: a present of the current slots alone (a model's `present_new.*`)
// stores what the whole present's last slots store, and a kept batch that grows gets room to
// grow, so that a decode's steps patch the fed past in place instead of rebuilding it.
import { describe, expect, it } from "vitest";
import { BatchBuilder } from "./batch.js";
import type { LayerKV } from "./forward.js";
import { BatchPast, SequenceKV } from "./kv-cache.js";

const SHAPE = { layers: 2, heads: 3, headDim: 4 };
const { layers: L, heads: H, headDim: D } = SHAPE;

/** A present `[B, H, slots, D]` per layer whose every value names its layer, row, head, slot and lane. */
function present(B: number, slots: number, firstSlot = 0): LayerKV[] {
  return Array.from({ length: L }, (_, l) => {
    const key = new Float32Array(B * H * slots * D);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let t = 0; t < slots; t++)
          for (let d = 0; d < D; d++) key[((b * H + h) * slots + t) * D + d] = l * 1e6 + b * 1e5 + h * 1e4 + (firstSlot + t) * 10 + d;
    return { key, value: key.map((x) => -x) };
  });
}

describe("SequenceKV", () => {
  it("stores the same slots from a whole present and from the current slots alone", () => {
    const P = 5;
    const S = 3;
    const whole = new SequenceKV(SHAPE, 2);
    const slots = new SequenceKV(SHAPE, 2);
    for (const [row, count] of [
      [1, 2],
      [0, 3],
    ] as const) {
      whole.append(present(2, P + S), row, P + S, P, count);
      slots.append({ layers: present(2, S, P), first: P }, row, P + S, P, count);
    }
    expect(slots.length).toBe(5);
    expect(slots.layersOfLength()).toEqual(whole.layersOfLength());
    // Row 1's slot P, head 2, lane 3, of layer 1 is the first slot stored.
    expect(slots.layersOfLength()[1]!.key[(2 * 5 + 0) * D + 3]).toBe(1e6 + 1e5 + 2 * 1e4 + P * 10 + 3);
  });

  it("refuses a slot before the present's first", () => {
    const kv = new SequenceKV(SHAPE, 4);
    expect(() => kv.append({ layers: present(1, 2, 6), first: 6 }, 0, 8, 5, 1)).toThrow(/slot 5 is not in a present of slots from 6/);
  });
});

/** Row `b`'s slot `t` of layer `l`'s batched keys, head `h`, lane `d`. */
const at = (layers: LayerKV[], past: number, l: number, b: number, h: number, t: number, d: number) =>
  layers[l]!.key[((b * H + h) * past + t) * D + d];

describe("BatchPast", () => {
  it("gives a growing batch room, then patches its new slots in place; new rows get an exact batch", () => {
    const a = new SequenceKV(SHAPE, 1);
    const b = new SequenceKV(SHAPE, 1);
    a.append(present(1, 64), 0, 64, 0, 64);
    b.append(present(1, 40), 0, 40, 0, 40);
    const batch = new BatchPast(SHAPE, true);
    const first = batch.prepare([a, b]);
    expect(first.past).toBe(64);

    a.append({ layers: present(1, 1, 64), first: 64 }, 0, 65, 64, 1);
    const grown = batch.prepare([a, b]);
    expect(grown.past).toBe(65 + 17); // a quarter more, rounded up
    const layers = grown.layers as LayerKV[];
    expect(at(layers, grown.past, 1, 0, 2, 64, 3)).toBe(1e6 + 2e4 + 640 + 3);
    expect(at(layers, grown.past, 1, 1, 2, 39, 3)).toBe(1e6 + 2e4 + 390 + 3);
    expect(at(layers, grown.past, 1, 1, 2, 40, 3)).toBe(0); // past row b's length: zeros, blocked by the mask

    for (let t = 65; t < 82; t++) {
      b.append({ layers: present(1, 1, 40 + t - 65), first: 40 + t - 65 }, 0, 41 + t - 65, 40 + t - 65, 1);
      a.append({ layers: present(1, 1, t), first: t }, 0, t + 1, t, 1);
      const next = batch.prepare([a, b]);
      expect(next.past).toBe(82);
      expect(next.layers).toBe(layers); // the same tensors, patched
      expect(at(layers, 82, 0, 0, 1, t, 2)).toBe(1e4 + t * 10 + 2);
      expect(at(layers, 82, 0, 1, 1, 40 + t - 65, 2)).toBe(1e4 + (40 + t - 65) * 10 + 2);
    }
    expect(a.length).toBe(82);
    expect(batch.prepare([a, b]).layers).toBe(layers);

    // Other rows: a lone row is fed its cache's own arrays; two again get an exact batch.
    const alone = batch.prepare([b]);
    expect(alone).toEqual(b.storage());
    expect(alone.layers).toBe(b.storage().layers);
    const again = batch.prepare([b, a]);
    expect(again.past).toBe(82);
    expect(again.layers).not.toBe(layers);
    expect(at(again.layers as LayerKV[], 82, 1, 1, 0, 81, 1)).toBe(1e6 + 810 + 1);
  });

  it("feeds a lone row its cache's own arrays and blocks their spare slots in the attention mask", () => {
    const kv = new SequenceKV(SHAPE, 1);
    kv.append(present(1, 8), 0, 8, 0, 8);
    const builder = new BatchBuilder(SHAPE, 1, 0, { roomToGrow: true });
    builder.build([{ kv, tokens: [1] }]);
    kv.append({ layers: present(1, 1, 8), first: 8 }, 0, 9, 8, 1);
    const inputs = builder.build([{ kv, tokens: [2] }]);
    // A lone row is fed its cache's own arrays: its capacity (doubled from 8) is the past.
    expect(inputs.past).toBe(16);
    expect(inputs.pastKeyValues).toBe(kv.storage().layers);
    const row = Array.from(inputs.attentionMask);
    expect(row.slice(0, 9).every((x) => x === 0)).toBe(true);
    expect(row.slice(9, 16).every((x) => x < -1e8)).toBe(true);
    expect(row[16]).toBe(0); // the current token sees itself
    expect(inputs.positionIds[0]).toBe(9n);
  });
});

describe("BatchPast without roomToGrow", () => {
  it("rebuilds a grown batch exactly as long as its longest row", () => {
    const kv = new SequenceKV(SHAPE, 1);
    kv.append(present(1, 8), 0, 8, 0, 8);
    const batch = new BatchPast(SHAPE);
    expect(batch.prepare([kv]).past).toBe(8);
    kv.append({ layers: present(1, 1, 8), first: 8 }, 0, 9, 8, 1);
    expect(batch.prepare([kv]).past).toBe(9);
  });
});
