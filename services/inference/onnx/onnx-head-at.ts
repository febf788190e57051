import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Field, fieldsOf, type GraphNode, renamedOutput } from "./onnx-head.js";
import {
  ATTR_I,
  ATTR_NAME,
  ATTR_T,
  ATTR_TYPE,
  ATTR_TYPE_INT,
  ATTR_TYPE_TENSOR,
  DATA_INT64,
  NODE_ATTRIBUTE,
  NODE_INPUT,
  NODE_NAME,
  NODE_OP_TYPE,
  NODE_OUTPUT,
  TENSOR_DATA_TYPE,
  TENSOR_DIMS,
  TENSOR_NAME,
  TENSOR_RAW_DATA,
} from "./onnx-proto.js";

const utf8 = new TextDecoder();

/**
 * Narrows the output head to the positions the engine asks for (the `at` input, int64
 * `[B, K]` of indices into the forward's `B * S` rows), so a decision's readout forward pays
 * the head (the `[H, V]` product, about a sixth of a row token's multiply-adds on the bundled
 * model) and the greedy readout after it only at its answer slots, and fetches `[B, K, V]`
 * logits instead of `[B, S, V]`:
 *
 *   logits = Reshape(Gemm(hidden [B*S, H], W, c), shape)            (as exported)
 *   logits = Reshape(Gemm(Gather(hidden, Reshape(at, [-1])), W, c), Concat(Shape(at), [-1]))
 *
 * Gather picks whole rows of the hidden states and Gemm computes each output row from its
 * input row alone, so the logits kept are the ones the whole head computed (onnx-head.test.ts
 * checks them against the unedited model). Only this form, the one convert/ exports, is
 * narrowed: `logits` made by a Reshape of a Gemm (no transA) whose output nothing else reads.
 * Returns, per moved node index, the node payloads that replace it; undefined when the form
 * does not match (the head then stays whole, and the model has no `at` input).
 */
export function headAtPositions(
  nodes: readonly (GraphNode & { field: Field })[],
  moved: ReadonlySet<number>,
  logitsProducer: number,
  names: { at: string; prefix: string; output: string; gather?: boolean },
): Map<number, Uint8Array[]> | undefined {
  const reshape = nodes[logitsProducer]!;
  if (reshape.opType !== "Reshape" || reshape.inputs.length !== 2) return undefined;
  const product = reshape.inputs[0]!;
  const gemmIndex = nodes.findIndex((n) => n.outputs.includes(product));
  const gemm = nodes[gemmIndex];
  if (gemm === undefined || !moved.has(gemmIndex) || gemm.opType !== "Gemm" || transposesA(gemm.field.payload!)) return undefined;
  if (nodes.some((n, i) => i !== logitsProducer && n.inputs.includes(product))) return undefined;

  const { at, prefix, output } = names;
  const minusOne = `${prefix}_minus_one`;
  const atFlat = `${prefix}_at_flat`;
  const rows = `${prefix}_rows`;
  const atShape = `${prefix}_at_shape`;
  const shape = `${prefix}_shape`;
  // With the branch already narrowed (onnx-layer-at.ts) the head's input holds only the
  // asked positions, in order: no gather.
  const beforeGemm = [
    int64Constant(minusOne, [-1n]),
    ...(names.gather === false
      ? [gemm.field.payload!]
      : [
          node("Reshape", [at, minusOne], [atFlat], `${prefix}_at_flat_node`),
          node("Gather", [gemm.inputs[0]!, atFlat], [rows], `${prefix}_gather`, (w) => intAttribute(w, "axis", 0)),
          withFirstInput(gemm.field.payload!, rows),
        ]),
  ];
  const replacingReshape = [
    node("Shape", [at], [atShape], `${prefix}_at_shape_node`),
    node("Concat", [atShape, minusOne], [shape], `${prefix}_shape_node`, (w) => intAttribute(w, "axis", 0)),
    renamedOutput(node("Reshape", [product, shape], [reshape.outputs[0]!], `${prefix}_reshape`), reshape.outputs[0]!, output),
  ];
  return new Map([
    [gemmIndex, beforeGemm],
    [logitsProducer, replacingReshape],
  ]);
}

/** A Constant node whose value is the 1-D int64 tensor `values`, named `name`. */
export function int64Constant(name: string, values: readonly bigint[]): Uint8Array {
  return node("Constant", [], [name], `${name}_node`, (w) => {
    w.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
    w.tag(ATTR_NAME, WireType.LengthDelimited).string("value");
    w.tag(ATTR_T, WireType.LengthDelimited).fork();
    w.tag(TENSOR_DIMS, WireType.Varint).int64(values.length);
    w.tag(TENSOR_DATA_TYPE, WireType.Varint).int32(DATA_INT64);
    w.tag(TENSOR_NAME, WireType.LengthDelimited).string(`${name}_value`);
    w.tag(TENSOR_RAW_DATA, WireType.LengthDelimited).bytes(new Uint8Array(BigInt64Array.from(values).buffer));
    w.join();
    w.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_TENSOR);
    w.join();
  });
}

export function node(op: string, inputs: string[], outputs: string[], name: string, attributes?: (w: BinaryWriter) => void): Uint8Array {
  const w = new BinaryWriter();
  for (const i of inputs) w.tag(NODE_INPUT, WireType.LengthDelimited).string(i);
  for (const o of outputs) w.tag(NODE_OUTPUT, WireType.LengthDelimited).string(o);
  w.tag(NODE_NAME, WireType.LengthDelimited).string(name);
  w.tag(NODE_OP_TYPE, WireType.LengthDelimited).string(op);
  attributes?.(w);
  return w.finish();
}

export function intAttribute(w: BinaryWriter, name: string, value: number): void {
  w.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
  w.tag(ATTR_NAME, WireType.LengthDelimited).string(name);
  w.tag(ATTR_I, WireType.Varint).int64(value);
  w.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_INT);
  w.join();
}

/** The node with its first input renamed to `to`. */
function withFirstInput(payload: Uint8Array, to: string): Uint8Array {
  const w = new BinaryWriter();
  let first = true;
  for (const f of fieldsOf(payload)) {
    if (f.field === NODE_INPUT && first) {
      w.tag(NODE_INPUT, WireType.LengthDelimited).string(to);
      first = false;
    } else {
      w.raw(f.raw);
    }
  }
  return w.finish();
}

/** Whether a Gemm node has transA set. */
function transposesA(payload: Uint8Array): boolean {
  for (const f of fieldsOf(payload)) {
    if (f.field !== NODE_ATTRIBUTE || f.payload === undefined) continue;
    const attribute = fieldsOf(f.payload);
    const name = attribute.find((a) => a.field === ATTR_NAME && a.payload !== undefined);
    if (name === undefined || utf8.decode(name.payload) !== "transA") continue;
    const i = attribute.find((a) => a.field === ATTR_I);
    return i !== undefined && i.raw[i.raw.length - 1] !== 0;
  }
  return false;
}
