import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ATTR_I,
  ATTR_NAME,
  ATTR_TYPE,
  ATTR_TYPE_INT,
  GRAPH_NODE,
  MODEL_GRAPH,
  NODE_ATTRIBUTE,
  NODE_OP_TYPE,
  mainGraphEntries,
} from "./onnx-proto.js";

const MATMUL_NBITS = "MatMulNBits";
const ACCURACY_LEVEL = "accuracy_level";

/**
 * MatMulNBits' `accuracy_level` on the CPU provider when config.json names none: 4, int8
 * compute of the activations (what onnxruntime-genai's model builder writes for the CPU).
 * Without it ONNX Runtime's CPU kernel dequantizes the 4-bit weights and computes in float32:
 * at SDAR-1.7B a 64-token block ran 1.8-3.9x slower than int8 weights, and 2.8x faster with
 * level 4 at the same logits' error (bench/full_size/README.md).
 */
export const CPU_ACCURACY_LEVEL = 4;

/** The `accuracy_level` of each MatMulNBits node of the main graph (undefined: not set), in order. */
export function matMulNBitsAccuracyLevels(model: Uint8Array): (number | undefined)[] {
  const levels: (number | undefined)[] = [];
  forEachNode(model, (node) => {
    const parsed = readNode(node);
    if (parsed.opType === MATMUL_NBITS) levels.push(parsed.accuracyLevel);
  });
  return levels;
}

/**
 * The model with `accuracy_level` = `level` on every MatMulNBits node of the main graph: on
 * the nodes that set none, or on all of them when `replace` (config.json named a level).
 * Undefined when no node changes (no MatMulNBits, or all already as asked). Rewritten at the
 * protobuf wire level: every other field (initializers, external-data references) is copied
 * as it is, so a model whose weights live in `model.onnx.data` stays small here.
 */
export function withMatMulNBitsAccuracy(model: Uint8Array, level: number, replace = false): Uint8Array | undefined {
  let changed = false;
  const out = new BinaryWriter();
  const reader = new BinaryReader(model);
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [field, wireType] = reader.tag();
    if (field !== MODEL_GRAPH || wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, field);
      out.raw(model.subarray(start, reader.pos));
      continue;
    }
    const graph = reader.bytes();
    const g = new BinaryReader(graph);
    const graphOut = new BinaryWriter();
    while (g.pos < g.len) {
      const at = g.pos;
      const [f, w] = g.tag();
      if (f !== GRAPH_NODE || w !== WireType.LengthDelimited) {
        g.skip(w, f);
        graphOut.raw(graph.subarray(at, g.pos));
        continue;
      }
      const node = g.bytes();
      const parsed = readNode(node);
      const edit = parsed.opType === MATMUL_NBITS && (parsed.accuracyLevel === undefined || (replace && parsed.accuracyLevel !== level));
      if (!edit) {
        graphOut.raw(graph.subarray(at, g.pos));
        continue;
      }
      changed = true;
      graphOut.tag(GRAPH_NODE, WireType.LengthDelimited).bytes(nodeWithLevel(node, level));
    }
    out.tag(MODEL_GRAPH, WireType.LengthDelimited).bytes(graphOut.finish());
  }
  return changed ? out.finish() : undefined;
}

function forEachNode(model: Uint8Array, visit: (node: Uint8Array) => void): void {
  for (const [field, bytes] of mainGraphEntries(model)) if (field === GRAPH_NODE) visit(bytes);
}

function readNode(node: Uint8Array): { opType: string; accuracyLevel: number | undefined } {
  let opType = "";
  let accuracyLevel: number | undefined;
  const r = new BinaryReader(node);
  while (r.pos < r.len) {
    const [f, w] = r.tag();
    if (f === NODE_OP_TYPE && w === WireType.LengthDelimited) opType = r.string();
    else if (f === NODE_ATTRIBUTE && w === WireType.LengthDelimited) {
      const attr = readIntAttribute(r.bytes());
      if (attr.name === ACCURACY_LEVEL) accuracyLevel = attr.value ?? 0;
    } else r.skip(w, f);
  }
  return { opType, accuracyLevel };
}

function readIntAttribute(attr: Uint8Array): { name: string; value: number | undefined } {
  let name = "";
  let value: number | undefined;
  const r = new BinaryReader(attr);
  while (r.pos < r.len) {
    const [f, w] = r.tag();
    if (f === ATTR_NAME && w === WireType.LengthDelimited) name = r.string();
    else if (f === ATTR_I && w === WireType.Varint) value = Number(r.int64());
    else r.skip(w, f);
  }
  return { name, value };
}

/** The node's fields as they are, less any accuracy_level attribute, then accuracy_level = level. */
function nodeWithLevel(node: Uint8Array, level: number): Uint8Array {
  const out = new BinaryWriter();
  const r = new BinaryReader(node);
  while (r.pos < r.len) {
    const at = r.pos;
    const [f, w] = r.tag();
    if (f === NODE_ATTRIBUTE && w === WireType.LengthDelimited) {
      if (readIntAttribute(r.bytes()).name === ACCURACY_LEVEL) continue;
    } else r.skip(w, f);
    out.raw(node.subarray(at, r.pos));
  }
  out.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
  out.tag(ATTR_NAME, WireType.LengthDelimited).string(ACCURACY_LEVEL);
  out.tag(ATTR_I, WireType.Varint).int64(level);
  out.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_INT);
  out.join();
  return out.finish();
}
