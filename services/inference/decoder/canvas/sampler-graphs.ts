// The canvas sampler's per-step work over [canvas, vocab] as weightless ONNX graphs, built at
// load time and run on the denoiser's execution provider (graph-sampler.ts), so a step brings
// a few numbers per position to the host instead of the vocabulary's logits. They compute what
// sampler.ts's processRow and logprobs.ts's logprobsAt compute (those stay the reference).
import { GraphWriter } from "../../onnx/onnx-graph-writer.js";
import { DATA_DOUBLE, DATA_FLOAT, DATA_INT32, DATA_INT64, GRAPH_INPUT, GRAPH_OUTPUT } from "../../onnx/onnx-proto.js";

/**
 * float64 is processRow's own arithmetic (softmax, entropy and the inverse-CDF sum in doubles),
 * for execution providers with doubles (CPU); float32 for those without (WebGPU), where the
 * cumulative sum over a large vocabulary rounds differently from the reference.
 */
export type SamplerPrecision = "float64" | "float32";

const OPSET = 18; // ReduceMax takes its axes as an input from 18 on
const INT64_MAX = Number.MAX_SAFE_INTEGER; // Slice clamps ends to the dimension

/**
 * `logits` float32 `[B, C, V]`, `temperature` `[B]` and `uniforms` `[B, C]` (the precision's
 * type) -> `entropy` `[B, C]` (the precision's type) of softmax(logits / T), `argmax` int32
 * `[B, C]` (ties to the lowest id) and `sample` int32 `[B, C]`: the first id whose cumulative
 * sum of exp(logits / T - max) exceeds uniform * total, as processRow draws it. The total is
 * the cumulative sum's last element, so sample and entropy share the reference's sequential sum.
 */
export function samplerGraph(precision: SamplerPrecision): Uint8Array {
  const real = precision === "float64" ? DATA_DOUBLE : DATA_FLOAT;
  const g = new GraphWriter(`tessera_canvas_sampler_${precision}`, OPSET);
  g.value(GRAPH_INPUT, "logits", DATA_FLOAT);
  g.value(GRAPH_INPUT, "temperature", real);
  g.value(GRAPH_INPUT, "uniforms", real);
  g.int64s("last", [-1]);
  g.int64s("last_scalar", [-1], true);
  g.int64s("batch_to_3d", [1, 2]);
  g.int64s("one", [1]);
  g.int64s("to_end", [INT64_MAX]);

  // ArgMax on the raw logits: dividing by T > 0 keeps the order, and ArgMax keeps the first of ties.
  g.node(
    "ArgMax",
    ["logits"],
    ["argmax_i64"],
    [
      ["axis", -1],
      ["keepdims", 0],
    ],
  );
  g.node("Cast", ["argmax_i64"], ["argmax"], [["to", DATA_INT32]]);

  g.node("Cast", ["logits"], ["x_raw"], [["to", real]]);
  g.node("Unsqueeze", ["temperature", "batch_to_3d"], ["t"]);
  g.node("Div", ["x_raw", "t"], ["x"]);
  g.node("ReduceMax", ["x", "last"], ["max"], [["keepdims", 1]]);
  g.node("Sub", ["x", "max"], ["y"]);
  g.node("Exp", ["y"], ["e"]);
  g.node("CumSum", ["e", "last_scalar"], ["cdf"]);
  g.node("Slice", ["cdf", "last", "to_end", "last"], ["sum"]);

  // H = log(sum) - sum(e * y) / sum  (= -sum p log p with log p = y - log(sum))
  g.node("Log", ["sum"], ["log_sum"]);
  g.node("Mul", ["e", "y"], ["ey"]);
  g.node("ReduceSum", ["ey", "last"], ["sum_ey"], [["keepdims", 1]]);
  g.node("Div", ["sum_ey", "sum"], ["mean_y"]);
  g.node("Sub", ["log_sum", "mean_y"], ["entropy_3d"]);
  g.node("Squeeze", ["entropy_3d", "last"], ["entropy"]);

  // The cdf never decreases, so the first id with cdf > target is the count of ids with cdf <= target.
  g.node("Unsqueeze", ["uniforms", "last"], ["u"]);
  g.node("Mul", ["u", "sum"], ["target"]);
  g.node("LessOrEqual", ["cdf", "target"], ["below"]);
  g.node("Cast", ["below"], ["below_i64"], [["to", DATA_INT64]]);
  g.node("ReduceSum", ["below_i64", "last"], ["count"], [["keepdims", 0]]);
  g.node("Shape", ["logits"], ["vocab"], [["start", -1]]);
  g.node("Sub", ["vocab", "one"], ["last_id"]);
  g.node("Min", ["count", "last_id"], ["sample_i64"]);
  g.node("Cast", ["sample_i64"], ["sample"], [["to", DATA_INT32]]);

  g.value(GRAPH_OUTPUT, "entropy", real);
  g.value(GRAPH_OUTPUT, "argmax", DATA_INT32);
  g.value(GRAPH_OUTPUT, "sample", DATA_INT32);
  return g.model();
}

/**
 * The logprob readout of the raw logits (no temperature): `logits` float32 `[P, V]`, `k` int64
 * `[1]` (>= 1) -> `log_z` `[P]` (the precision's type: max + log(sum(exp(x - max)))),
 * `top_logits` float32 `[P, k]` and `top_ids` int32 `[P, k]`, the k largest, ties to the lower id.
 * A token's log-probability is its logit minus log_z; the reply token is the argmax, top_ids[0].
 */
export function logprobGraph(precision: SamplerPrecision): Uint8Array {
  const real = precision === "float64" ? DATA_DOUBLE : DATA_FLOAT;
  const g = new GraphWriter(`tessera_canvas_logprobs_${precision}`, OPSET);
  g.value(GRAPH_INPUT, "logits", DATA_FLOAT);
  g.value(GRAPH_INPUT, "k", DATA_INT64);
  g.int64s("last", [-1]);
  g.node("Cast", ["logits"], ["x"], [["to", real]]);
  g.node("ReduceMax", ["x", "last"], ["max"], [["keepdims", 1]]);
  g.node("Sub", ["x", "max"], ["y"]);
  g.node("Exp", ["y"], ["e"]);
  g.node("ReduceSum", ["e", "last"], ["sum"], [["keepdims", 1]]);
  g.node("Log", ["sum"], ["log_sum"]);
  g.node("Add", ["max", "log_sum"], ["log_z_2d"]);
  g.node("Squeeze", ["log_z_2d", "last"], ["log_z"]);
  g.node(
    "TopK",
    ["logits", "k"],
    ["top_logits", "top_ids_i64"],
    [
      ["axis", -1],
      ["largest", 1],
      ["sorted", 1],
    ],
  );
  g.node("Cast", ["top_ids_i64"], ["top_ids"], [["to", DATA_INT32]]);
  g.value(GRAPH_OUTPUT, "log_z", real);
  g.value(GRAPH_OUTPUT, "top_logits", DATA_FLOAT);
  g.value(GRAPH_OUTPUT, "top_ids", DATA_INT32);
  return g.model();
}
