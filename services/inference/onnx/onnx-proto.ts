// Field numbers of onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto, TypeProto), for the load-time graph edits (onnx-readout.ts, onnx-head.ts),
// which read and write the model at the protobuf wire level.
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

export const MODEL_GRAPH = 7;
export const MODEL_OPSET_IMPORT = 8;
export const GRAPH_NODE = 1;
export const GRAPH_NAME = 2;
export const GRAPH_INITIALIZER = 5;
export const GRAPH_INPUT = 11;
export const GRAPH_OUTPUT = 12;
export const GRAPH_VALUE_INFO = 13;
export const NODE_INPUT = 1;
export const NODE_OUTPUT = 2;
export const NODE_NAME = 3;
export const NODE_OP_TYPE = 4;
export const NODE_ATTRIBUTE = 5;
export const ATTR_NAME = 1;
export const ATTR_I = 3;
export const ATTR_T = 5;
export const ATTR_G = 6;
export const ATTR_INTS = 8;
export const ATTR_GRAPHS = 11;
export const ATTR_TYPE = 20;
export const ATTR_TYPE_INT = 2;
export const ATTR_TYPE_TENSOR = 4;
export const ATTR_TYPE_GRAPH = 5;
export const ATTR_TYPE_INTS = 7;
export const ATTR_TYPE_GRAPHS = 10;
export const TENSOR_DIMS = 1;
export const TENSOR_DATA_TYPE = 2;
export const TENSOR_NAME = 8;
export const TENSOR_RAW_DATA = 9;
export const TENSOR_DATA_LOCATION = 14;
export const VALUE_INFO_NAME = 1;
export const VALUE_INFO_TYPE = 2;
export const TYPE_TENSOR = 1;
export const TENSOR_TYPE_ELEM_TYPE = 1;
export const TENSOR_TYPE_SHAPE = 2;
export const DATA_FLOAT = 1;
export const DATA_INT32 = 6;
export const DATA_INT64 = 7;
export const DATA_BOOL = 9;
export const DATA_DOUBLE = 11;

/** The chunks one after the other, in one new array. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Each length-delimited field of the model's main graph (nodes, initializers, ...), with its field number. */
export function* mainGraphEntries(model: Uint8Array): Generator<[field: number, bytes: Uint8Array]> {
  const reader = new BinaryReader(model);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field !== MODEL_GRAPH || wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, field);
      continue;
    }
    const graph = new BinaryReader(reader.bytes());
    while (graph.pos < graph.len) {
      const [f, w] = graph.tag();
      if (w === WireType.LengthDelimited) yield [f, graph.bytes()];
      else graph.skip(w, f);
    }
  }
}
