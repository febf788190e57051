// The canvas sampler's per-step work over [canvas, vocab] as weightless ONNX graphs, built at
// load time for the model's vocabulary and run on ONNX Runtime (graph-sampler.ts), so a step
// brings a few numbers per position to the host instead of the vocabulary's logits. They
// compute what sampler.ts's processRow and logprobs.ts's logprobsAt compute (those stay the
// reference), the way transformers does: softmax and entropy in float32, the inverse CDF of
// the float32 probabilities summed in float64 (canvas_reference_decode.py's cumsum).
import { GraphWriter } from "../../onnx/onnx-graph-writer.js";
import { DATA_DOUBLE, DATA_FLOAT, DATA_INT32, DATA_INT64, GRAPH_INPUT, GRAPH_OUTPUT } from "../../onnx/onnx-proto.js";

const OPSET = 18; // Reduce* take their axes as an input from 18 on
const INT64_MAX = Number.MAX_SAFE_INTEGER; // Slice clamps ends to the dimension

/** Reductions over the vocabulary run in two levels: blocks of this many ids, then the ids of one block. */
export function vocabBlock(vocab: number): number {
  return Math.min(512, vocab);
}

/** `[B, C, V]` -> `[B, C, nb, bs]`, padded at the end with `padValue` (a float32 scalar initializer) when bs does not divide V. */
function toBlocks(g: GraphWriter, x: string, vocab: number, padValue: string): string {
  const bs = vocabBlock(vocab);
  const padded = Math.ceil(vocab / bs) * bs - vocab;
  let input = x;
  if (padded > 0) {
    g.node("Pad", [x, "pads", padValue], [`${x}_padded`]);
    input = `${x}_padded`;
  }
  g.node("Reshape", [input, "blocks_shape"], [`${x}_blocks`]);
  return `${x}_blocks`;
}

/** The ids of block `block` (int64 `[B, C, 1]`) of `blocks` `[B, C, nb, bs]`: `[B, C, 1, bs]`. */
function blockOf(g: GraphWriter, blocks: string, block: string): string {
  g.node("Unsqueeze", [block, "axis_3"], [`${block}_4d`]);
  g.node("Expand", [`${block}_4d`, "block_wide"], [`${block}_index`]);
  g.node("GatherElements", [blocks, `${block}_index`], [`${blocks}_of_${block}`], [["axis", 2]]);
  return `${blocks}_of_${block}`;
}

/** The id of the `[B, C, 1]` index `within` block `block`: `[B, C]` int32, at most V - 1. */
function idOf(g: GraphWriter, block: string, within: string, out: string): void {
  g.node("Mul", [block, "block_size"], [`${out}_block_start`]);
  g.node("Add", [`${out}_block_start`, within], [`${out}_3d`]);
  g.node("Min", [`${out}_3d`, "last_id"], [`${out}_clamped`]);
  g.node("Squeeze", [`${out}_clamped`, "last"], [`${out}_i64`]);
  g.node("Cast", [`${out}_i64`], [out], [["to", DATA_INT32]]);
}

/**
 * `logits` float32 `[B, C, V]` (V = `vocab`), `temperature` float32 `[B]`, `uniforms` float64
 * `[B, C]` -> `entropy` float32 `[B, C]` of softmax(logits / T), `argmax` int32 `[B, C]` (ties
 * to the lowest id) and `sample` int32 `[B, C]`: the first id whose cumulative probability
 * exceeds uniform * total, as processRow draws it. The argmax and the cumulative sum run in two
 * levels (per block of ids, then within the one block that holds the answer): ONNX Runtime's
 * ArgMax and CumSum over the whole vocabulary are several times slower than its ReduceMax and
 * ReduceSum.
 */
export function samplerGraph(vocab: number): Uint8Array {
  const bs = vocabBlock(vocab);
  const nb = Math.ceil(vocab / bs);
  const g = new GraphWriter("tessera_canvas_sampler", OPSET);
  g.value(GRAPH_INPUT, "logits", DATA_FLOAT);
  g.value(GRAPH_INPUT, "temperature", DATA_FLOAT);
  g.value(GRAPH_INPUT, "uniforms", DATA_DOUBLE);
  g.int64s("last", [-1]);
  g.int64s("last_scalar", [-1], true);
  g.int64s("axes_1_2", [1, 2]);
  g.int64s("axis_3", [3]);
  g.int64s("to_end", [INT64_MAX]);
  g.int64s("blocks_shape", [0, 0, nb, bs]);
  g.int64s("block_wide", [1, 1, 1, bs]);
  g.int64s("block_size", [bs]);
  g.int64s("last_block", [nb - 1]);
  g.int64s("last_id", [vocab - 1]);
  if (nb * bs > vocab) {
    g.int64s("pads", [0, 0, 0, 0, 0, nb * bs - vocab]);
    g.floats("minus_inf", [Number.NEGATIVE_INFINITY], true);
    g.floats("zero", [0], true);
  }

  // Argmax of the raw logits (dividing by T > 0 keeps the order): the first block holding the
  // largest, then the first id in it holding it (ArgMax keeps the first of ties at both levels).
  const logitBlocks = toBlocks(g, "logits", vocab, "minus_inf");
  g.node("ReduceMax", [logitBlocks, "last"], ["block_max"], [["keepdims", 0]]);
  g.node(
    "ArgMax",
    ["block_max"],
    ["max_block"],
    [
      ["axis", -1],
      ["keepdims", 1],
    ],
  );
  g.node(
    "ArgMax",
    [blockOf(g, logitBlocks, "max_block")],
    ["max_within_4d"],
    [
      ["axis", -1],
      ["keepdims", 0],
    ],
  );
  idOf(g, "max_block", "max_within_4d", "argmax");

  // H = -sum p log p. p from Softmax, not exp(LogSoftmax): that is 1e-6 off where log p is -20.
  g.node("Unsqueeze", ["temperature", "axes_1_2"], ["t"]);
  g.node("Div", ["logits", "t"], ["x"]);
  g.node("Softmax", ["x"], ["p"], [["axis", -1]]);
  g.node("LogSoftmax", ["x"], ["log_p"], [["axis", -1]]);
  g.node("Mul", ["p", "log_p"], ["p_log_p"]);
  g.node("ReduceSum", ["p_log_p", "last"], ["neg_entropy"], [["keepdims", 0]]);
  g.node("Neg", ["neg_entropy"], ["entropy"]);

  // The sample. Level 1: the block the target falls in, by the float64 cumulative sum of the
  // blocks' float32 sums (each as close to its float64 sum as the float32 p are to theirs).
  const pBlocks = toBlocks(g, "p", vocab, "zero");
  g.node("ReduceSum", [pBlocks, "last"], ["block_sums32"], [["keepdims", 0]]);
  g.node("Cast", ["block_sums32"], ["block_sums"], [["to", DATA_DOUBLE]]);
  g.node("CumSum", ["block_sums", "last_scalar"], ["block_cdf"]);
  g.node("CumSum", ["block_sums", "last_scalar"], ["block_before"], [["exclusive", 1]]);
  g.node("Slice", ["block_cdf", "last", "to_end", "last"], ["total"]);
  g.node("Unsqueeze", ["uniforms", "last"], ["u"]);
  g.node("Mul", ["u", "total"], ["target"]);
  // The cdf never decreases, so the first index with cdf > target is the count of those with cdf <= target.
  g.node("LessOrEqual", ["block_cdf", "target"], ["blocks_below"]);
  g.node("Cast", ["blocks_below"], ["blocks_below_i64"], [["to", DATA_INT64]]);
  g.node("ReduceSum", ["blocks_below_i64", "last"], ["block_count"], [["keepdims", 1]]);
  g.node("Min", ["block_count", "last_block"], ["sample_block"]);
  g.node("GatherElements", ["block_before", "sample_block"], ["before"], [["axis", 2]]);
  // Level 2: that block's ids, their cumulative sum in float64 after the blocks before it.
  g.node("Cast", [blockOf(g, pBlocks, "sample_block")], ["in_block"], [["to", DATA_DOUBLE]]);
  g.node("CumSum", ["in_block", "last_scalar"], ["in_block_cdf"]);
  g.node("Unsqueeze", ["before", "axis_3"], ["before_4d"]);
  g.node("Add", ["in_block_cdf", "before_4d"], ["cdf"]);
  g.node("Unsqueeze", ["target", "axis_3"], ["target_4d"]);
  g.node("LessOrEqual", ["cdf", "target_4d"], ["ids_below"]);
  g.node("Cast", ["ids_below"], ["ids_below_i64"], [["to", DATA_INT64]]);
  g.node("ReduceSum", ["ids_below_i64", "last"], ["sample_within_4d"], [["keepdims", 0]]);
  idOf(g, "sample_block", "sample_within_4d", "sample");

  g.value(GRAPH_OUTPUT, "entropy", DATA_FLOAT);
  g.value(GRAPH_OUTPUT, "argmax", DATA_INT32);
  g.value(GRAPH_OUTPUT, "sample", DATA_INT32);
  return g.model();
}

/**
 * The logprob readout of the raw logits (no temperature): `logits` float32 `[P, V]`, `k` int64
 * `[1]` (>= 1) -> `log_z` float32 `[P]` (log of the sum of exp(logits)), `top_logits` float32
 * `[P, k]` and `top_ids` int32 `[P, k]`, the k largest, ties to the lower id. A token's
 * log-probability is its logit minus log_z; the reply token is the argmax, top_ids[0].
 */
export function logprobGraph(): Uint8Array {
  const g = new GraphWriter("tessera_canvas_logprobs", OPSET);
  g.value(GRAPH_INPUT, "logits", DATA_FLOAT);
  g.value(GRAPH_INPUT, "k", DATA_INT64);
  g.int64s("last", [-1]);
  // ReduceMax, Exp and ReduceSum: ONNX Runtime's ReduceLogSumExp is several times slower.
  g.node("ReduceMax", ["logits", "last"], ["max"], [["keepdims", 1]]);
  g.node("Sub", ["logits", "max"], ["y"]);
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
  g.value(GRAPH_OUTPUT, "log_z", DATA_FLOAT);
  g.value(GRAPH_OUTPUT, "top_logits", DATA_FLOAT);
  g.value(GRAPH_OUTPUT, "top_ids", DATA_INT32);
  return g.model();
}
