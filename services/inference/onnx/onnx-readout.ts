import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ATTR_I,
  ATTR_INTS,
  ATTR_NAME,
  ATTR_TYPE,
  ATTR_TYPE_INT,
  ATTR_TYPE_INTS,
  concatBytes,
  DATA_FLOAT,
  DATA_INT64,
  GRAPH_INITIALIZER,
  GRAPH_NODE,
  GRAPH_OUTPUT,
  MODEL_GRAPH,
  MODEL_OPSET_IMPORT,
  NODE_ATTRIBUTE,
  NODE_INPUT,
  NODE_NAME,
  NODE_OP_TYPE,
  NODE_OUTPUT,
  TENSOR_DATA_LOCATION,
  TENSOR_DATA_TYPE,
  TENSOR_DIMS,
  TENSOR_NAME,
  TENSOR_RAW_DATA,
  TENSOR_TYPE_ELEM_TYPE,
  TYPE_TENSOR,
  VALUE_INFO_NAME,
  VALUE_INFO_TYPE,
  mainGraphEntries,
} from "./onnx-proto.js";

/** Names of the outputs the engine adds to a model (never in a contract model). */
export const READOUT_CONFIDENCE = "tessera_readout_confidence";
export const READOUT_TOKEN = "tessera_readout_token";

/**
 * Adds the greedy readout to a contract model, so ONNX Runtime computes it where the logits
 * are (vectorized, on the GPU with the CUDA provider) and a denoising step fetches two
 * `[B, S]` tensors instead of the `[B, S, V]` logits:
 *
 *   allowed    = logits + banned               (-inf on the mask and pad tokens)
 *   confidence = ReduceMax(Softmax(allowed))   float32 [B, S]
 *   token      = ArgMax(allowed)               int64 [B, S], the first on ties
 *
 * (Measured on the tiny model: a forward with this readout takes no longer than the bare
 * forward fetching logits; TopK or LogSumExp forms were slower.)
 *
 * The model file is not parsed beyond its top level: an ONNX model is a protobuf message,
 * and a protobuf parser merges a message field that occurs twice, appending repeated fields.
 * So the original bytes followed by one more `graph` field holding only the new nodes,
 * initializers and outputs is the model with the readout added. Returns undefined when the
 * model's opset predates the operators' current form (opset < 13).
 */
export function withReadout(model: Uint8Array, vocab: number, banned: readonly number[]): Uint8Array | undefined {
  const extra = readoutGraph(model, vocab, banned);
  return extra === undefined ? undefined : concatBytes([model, extra]);
}

/**
 * The extra `graph` field withReadout appends to `model` (so a caller that edits the model
 * otherwise too can assemble the result in one copy); undefined when the opset is < 13.
 */
export function readoutGraph(model: Uint8Array, vocab: number, banned: readonly number[]): Uint8Array | undefined {
  const opset = defaultOpset(model);
  if (opset === undefined || opset < 13) return undefined;

  const bannedAdd = new Float32Array(vocab);
  for (const id of banned) if (id >= 0 && id < vocab) bannedAdd[id] = -Infinity;

  const graph = new BinaryWriter();
  const initializer = (name: string, dataType: number, dims: number[], raw: Uint8Array) => {
    graph.tag(GRAPH_INITIALIZER, WireType.LengthDelimited).fork();
    for (const d of dims) graph.tag(TENSOR_DIMS, WireType.Varint).int64(d);
    graph.tag(TENSOR_DATA_TYPE, WireType.Varint).int32(dataType);
    graph.tag(TENSOR_NAME, WireType.LengthDelimited).string(name);
    graph.tag(TENSOR_RAW_DATA, WireType.LengthDelimited).bytes(raw);
    graph.join();
  };
  const node = (op: string, inputs: string[], outputs: string[], attributes: [string, number | number[]][] = []) => {
    graph.tag(GRAPH_NODE, WireType.LengthDelimited).fork();
    for (const i of inputs) graph.tag(NODE_INPUT, WireType.LengthDelimited).string(i);
    for (const o of outputs) graph.tag(NODE_OUTPUT, WireType.LengthDelimited).string(o);
    graph.tag(NODE_NAME, WireType.LengthDelimited).string(`tessera_readout_${op}`);
    graph.tag(NODE_OP_TYPE, WireType.LengthDelimited).string(op);
    for (const [name, value] of attributes) {
      graph.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
      graph.tag(ATTR_NAME, WireType.LengthDelimited).string(name);
      if (Array.isArray(value)) {
        for (const v of value) graph.tag(ATTR_INTS, WireType.Varint).int64(v);
        graph.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_INTS);
      } else {
        graph.tag(ATTR_I, WireType.Varint).int64(value);
        graph.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_INT);
      }
      graph.join();
    }
    graph.join();
  };
  const output = (name: string, elemType: number) => {
    graph.tag(GRAPH_OUTPUT, WireType.LengthDelimited).fork();
    graph.tag(VALUE_INFO_NAME, WireType.LengthDelimited).string(name);
    graph.tag(VALUE_INFO_TYPE, WireType.LengthDelimited).fork();
    graph.tag(TYPE_TENSOR, WireType.LengthDelimited).fork();
    graph.tag(TENSOR_TYPE_ELEM_TYPE, WireType.Varint).int32(elemType);
    graph.join().join().join();
  };

  initializer("tessera_readout_banned", DATA_FLOAT, [vocab], new Uint8Array(bannedAdd.buffer));
  node("Add", ["logits", "tessera_readout_banned"], ["tessera_readout_allowed"]);
  node("Softmax", ["tessera_readout_allowed"], ["tessera_readout_probs"], [["axis", -1]]);
  if (opset >= 18) {
    initializer("tessera_readout_axes", DATA_INT64, [1], new Uint8Array(BigInt64Array.of(-1n).buffer));
    node("ReduceMax", ["tessera_readout_probs", "tessera_readout_axes"], [READOUT_CONFIDENCE], [["keepdims", 0]]);
  } else {
    node(
      "ReduceMax",
      ["tessera_readout_probs"],
      [READOUT_CONFIDENCE],
      [
        ["axes", [-1]],
        ["keepdims", 0],
      ],
    );
  }
  // ArgMax with select_last_index 0 takes the first (lowest) token on ties.
  node(
    "ArgMax",
    ["tessera_readout_allowed"],
    [READOUT_TOKEN],
    [
      ["axis", -1],
      ["keepdims", 0],
      ["select_last_index", 0],
    ],
  );
  output(READOUT_CONFIDENCE, DATA_FLOAT);
  output(READOUT_TOKEN, DATA_INT64);

  return new BinaryWriter().tag(MODEL_GRAPH, WireType.LengthDelimited).bytes(graph.finish()).finish();
}

/** The version of the default ("" or "ai.onnx") operator set the model imports. */
export function defaultOpset(model: Uint8Array): number | undefined {
  const reader = new BinaryReader(model);
  let version: number | undefined;
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field !== MODEL_OPSET_IMPORT || wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, field);
      continue;
    }
    const entry = new BinaryReader(reader.bytes());
    let domain = "";
    let v = 0;
    while (entry.pos < entry.len) {
      const [f, w] = entry.tag();
      if (f === 1 && w === WireType.LengthDelimited) domain = entry.string();
      else if (f === 2 && w === WireType.Varint) v = Number(entry.int64());
      else entry.skip(w, f);
    }
    if (domain === "" || domain === "ai.onnx") version = v;
  }
  return version;
}

/** Whether any initializer of the main graph keeps its data in an external file. */
export function usesExternalData(model: Uint8Array): boolean {
  for (const [field, bytes] of mainGraphEntries(model)) {
    if (field !== GRAPH_INITIALIZER) continue;
    const tensor = new BinaryReader(bytes);
    while (tensor.pos < tensor.len) {
      const [tf, tw] = tensor.tag();
      if (tf === TENSOR_DATA_LOCATION && tw === WireType.Varint) {
        if (tensor.int32() === 1) return true;
      } else {
        tensor.skip(tw, tf);
      }
    }
  }
  return false;
}
