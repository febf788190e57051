// The small ONNX graphs that move key/values between tensors on the device (device-kv.ts):
// no weights, a few copy operators each, run on the model's own execution provider so the
// key/values never leave the device.
import { DATA_FLOAT, DATA_INT64, GRAPH_INPUT, GRAPH_OUTPUT } from "./onnx-proto.js";
import { GraphWriter } from "./onnx-graph-writer.js";

/**
 * Extends `tensors` caches by a slice of a forward's present key/values, each tensor alike:
 * `out_i = Concat(cache_i [1, H, T, D], present_i[start0:end0, :, start1:end1, :], axis 2)`,
 * with `starts = [row, from]` and `ends = [row + 1, from + count]` fed as int64 `[2]`. The
 * first append of a cache has no cache: `withCache` false gives the slice alone.
 */
export function appendGraph(tensors: number, withCache: boolean): Uint8Array {
  const g = new GraphWriter(withCache ? "tessera_kv_append" : "tessera_kv_slice");
  g.int64s("axes", [0, 2]);
  g.value(GRAPH_INPUT, "starts", DATA_INT64);
  g.value(GRAPH_INPUT, "ends", DATA_INT64);
  for (let i = 0; i < tensors; i++) {
    if (withCache) g.value(GRAPH_INPUT, `cache_${i}`, DATA_FLOAT);
    g.value(GRAPH_INPUT, `present_${i}`, DATA_FLOAT);
    if (withCache) {
      g.node("Slice", [`present_${i}`, "starts", "ends", "axes"], [`slice_${i}`]);
      g.node("Concat", [`cache_${i}`, `slice_${i}`], [`out_${i}`], [["axis", 2]]);
    } else {
      g.node("Slice", [`present_${i}`, "starts", "ends", "axes"], [`out_${i}`]);
    }
    g.value(GRAPH_OUTPUT, `out_${i}`, DATA_FLOAT);
  }
  return g.model();
}

/**
 * Stacks `rows` caches into one batch, each tensor alike: row b of `out_i` is `x_i_b`
 * `[1, H, T_b, D]` zero-padded at the end of its slot axis to the longest (`pads_b`, int64
 * `[8]`, as ONNX Pad takes them). The padded slots are masked off by the forward's attention
 * mask; zeros keep them finite.
 */
export function gatherGraph(tensors: number, rows: number): Uint8Array {
  const g = new GraphWriter(`tessera_kv_gather_${rows}`);
  for (let b = 0; b < rows; b++) g.value(GRAPH_INPUT, `pads_${b}`, DATA_INT64);
  for (let i = 0; i < tensors; i++) {
    const padded: string[] = [];
    for (let b = 0; b < rows; b++) {
      g.value(GRAPH_INPUT, `x_${i}_${b}`, DATA_FLOAT);
      g.node("Pad", [`x_${i}_${b}`, `pads_${b}`], [`p_${i}_${b}`]);
      padded.push(`p_${i}_${b}`);
    }
    g.node("Concat", padded, [`out_${i}`], [["axis", 0]]);
    g.value(GRAPH_OUTPUT, `out_${i}`, DATA_FLOAT);
  }
  return g.model();
}

/** `out = x`: run with its output on the host, it brings a device tensor to host memory. */
export function downloadGraph(): Uint8Array {
  const g = new GraphWriter("tessera_download");
  g.value(GRAPH_INPUT, "x", DATA_FLOAT);
  g.node("Identity", ["x"], ["out"]);
  g.value(GRAPH_OUTPUT, "out", DATA_FLOAT);
  return g.model();
}
