import { headAtPositions, intAttribute, int64Constant, node } from "./onnx-head-at.js";
import { type Field, type GraphNode, renamedOutput } from "./onnx-head.js";
import { withNames } from "./onnx-layer-at.js";

type Nodes = readonly (GraphNode & { field: Field })[];
type Names = { at: string; prefix: string; output: string; gather?: boolean };

/**
 * Head products computed row by row from their first input, `[B, S, H]` → `[B, S, V]`, with
 * the same bits whatever the row count. Not MatMulNBits (int4): its sums for a row move in the
 * last bits with the number of rows (ONNX Runtime 1.30, CPU: a decision's logits by ~1e-6 on the
 * tiny int4 model, test/convert/head-at.test.ts), so an int4 head stays whole.
 */
const ROW_PRODUCTS = new Set(["MatMul", "MatMulIntegerToFloat"]);

/** Ops that quantize a whole tensor with one scale: rows computed apart would get other scales. */
const TENSOR_QUANTIZERS = new Set(["DynamicQuantizeLinear", "DynamicQuantizeMatMul"]);

/**
 * The head narrowed to the `at` positions, in the bundled model's form (headAtPositions) or in
 * the forms convert/ exports for Qwen-family checkpoints (matMulHeadAtPositions).
 */
export function narrowedHead(nodes: Nodes, moved: ReadonlySet<number>, logitsProducer: number, names: Names) {
  return headAtPositions(nodes, moved, logitsProducer, names) ?? matMulHeadAtPositions(nodes, moved, logitsProducer, names);
}

/**
 * Whether the branch quantizes activations per tensor (int8 weights: DynamicQuantizeLinear),
 * reading or computing such a scale: narrowing its layer to K positions would quantize those
 * rows with another scale than the whole forward's, so only the head (after its quantizer) is
 * narrowed.
 */
export function quantizesPerTensor(nodes: Nodes, moved: ReadonlySet<number>): boolean {
  const quantized = new Set(nodes.filter((n) => TENSOR_QUANTIZERS.has(n.opType)).flatMap((n) => n.outputs));
  return [...moved].some((i) => TENSOR_QUANTIZERS.has(nodes[i]!.opType) || nodes[i]!.inputs.some((x) => quantized.has(x)));
}

/**
 * Narrows a converted model's head, a product on `[B, S, H]` rather than the bundled model's
 * `Reshape(Gemm)`, to the `at` positions (int64 `[B, K]`, indices `b * S + s`):
 *
 *   fp32 / fp16:  logits = MatMul(x, W)
 *   int8:         logits = Mul(Cast(MatMulInteger(xq, Wq, xzp, wzp)), scales)   (xq from DynamicQuantizeLinear(x))
 *                 logits = MatMulIntegerToFloat(xq, Wq, …)
 *
 * The product's first input becomes `Reshape(Gather(Reshape(x, [-1, H]), Reshape(at, [-1])), [B, K, H])`,
 * so everything after it is `[B, K, V]`. Each product computes an output row from its input
 * row alone; in int8 the gather reads the rows already quantized (the activation's one scale
 * and zero point are still computed over all positions), so the kept logits are the whole
 * head's. DynamicQuantizeMatMul (which quantizes its own input per tensor) is not narrowed.
 * With `gather: false` (the branch already narrowed by onnx-layer-at.ts) nothing changes but
 * the form is confirmed. Returns undefined when the form does not match.
 */
export function matMulHeadAtPositions(
  nodes: Nodes,
  moved: ReadonlySet<number>,
  logitsProducer: number,
  names: Names,
): Map<number, Uint8Array[]> | undefined {
  const producerOf = (value: string) => nodes.findIndex((n) => n.outputs.includes(value));
  const readOnlyBy = (value: string, reader: number) => nodes.every((n, i) => i === reader || !n.inputs.includes(value));
  let product = logitsProducer;
  const last = nodes[logitsProducer]!;
  if (last.opType === "Mul" && last.inputs.length === 2) {
    const cast = producerOf(last.inputs[0]!);
    if (cast < 0 || !moved.has(cast) || nodes[cast]!.opType !== "Cast" || !readOnlyBy(last.inputs[0]!, logitsProducer)) return undefined;
    product = producerOf(nodes[cast]!.inputs[0]!);
    if (product < 0 || !moved.has(product) || nodes[product]!.opType !== "MatMulInteger") return undefined;
    if (!readOnlyBy(nodes[cast]!.inputs[0]!, cast)) return undefined;
  } else if (!ROW_PRODUCTS.has(last.opType)) {
    return undefined;
  }
  if (names.gather === false) return new Map();

  const head = nodes[product]!;
  const x = head.inputs[0]!;
  const { at, prefix } = names;
  const p = `${prefix}_rows`;
  const [minusOne, end, wholeShape, xShape, flatShape, flat, atFlat, gathered, atShape, rowsShape, rows] = [
    "minus_one",
    "end",
    "x_whole_shape",
    "x_shape",
    "flat_shape",
    "flat",
    "at_flat",
    "gathered",
    "at_shape",
    "shape",
    "at",
  ].map((s) => `${p}_${s}`);
  const concat = (inputs: string[], out: string) => node("Concat", inputs, [out], `${out}_node`, (w) => intAttribute(w, "axis", 0));
  const beforeProduct = [
    int64Constant(minusOne!, [-1n]),
    int64Constant(end!, [2n ** 62n]),
    node("Shape", [x], [wholeShape!], `${wholeShape}_node`),
    node("Slice", [wholeShape!, minusOne!, end!], [xShape!], `${xShape}_node`),
    concat([minusOne!, xShape!], flatShape!),
    node("Reshape", [x, flatShape!], [flat!], `${flat}_node`),
    node("Reshape", [at, minusOne!], [atFlat!], `${atFlat}_node`),
    node("Gather", [flat!, atFlat!], [gathered!], `${gathered}_node`, (w) => intAttribute(w, "axis", 0)),
    node("Shape", [at], [atShape!], `${atShape}_node`),
    concat([atShape!, xShape!], rowsShape!),
    node("Reshape", [gathered!, rowsShape!], [rows!], `${rows}_node`),
    withNames(
      product === logitsProducer ? renamedOutput(head.field.payload!, last.outputs[0]!, names.output) : head.field.payload!,
      new Map([[x, rows!]]),
    ),
  ];
  if (product !== logitsProducer)
    return new Map([
      [product, beforeProduct],
      [logitsProducer, [renamedOutput(last.field.payload!, last.outputs[0]!, names.output)]],
    ]);
  return new Map([[product, beforeProduct]]);
}
