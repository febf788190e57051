// Writes small weightless ONNX graphs at the protobuf wire level (onnx-proto.ts's field numbers):
// the key/value copy graphs (onnx-kv-graphs.ts) and the canvas sampler (decoder/canvas/sampler-graphs.ts).
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ATTR_I,
  ATTR_NAME,
  ATTR_TYPE,
  ATTR_TYPE_INT,
  DATA_DOUBLE,
  DATA_FLOAT,
  DATA_INT64,
  GRAPH_INITIALIZER,
  type GRAPH_INPUT,
  GRAPH_NAME,
  GRAPH_NODE,
  type GRAPH_OUTPUT,
  MODEL_GRAPH,
  MODEL_OPSET_IMPORT,
  NODE_ATTRIBUTE,
  NODE_INPUT,
  NODE_NAME,
  NODE_OP_TYPE,
  NODE_OUTPUT,
  TENSOR_DATA_TYPE,
  TENSOR_DIMS,
  TENSOR_NAME,
  TENSOR_RAW_DATA,
  TENSOR_TYPE_ELEM_TYPE,
  TYPE_TENSOR,
  VALUE_INFO_NAME,
  VALUE_INFO_TYPE,
} from "./onnx-proto.js";

const MODEL_IR_VERSION = 1;
const IR_VERSION = 8;

/** A graph under construction: nodes, inputs and outputs in the order added. */
export class GraphWriter {
  private readonly graph = new BinaryWriter();
  private nodes = 0;

  constructor(
    name: string,
    private readonly opset = 17,
  ) {
    this.graph.tag(GRAPH_NAME, WireType.LengthDelimited).string(name);
  }

  node(op: string, inputs: string[], outputs: string[], attributes: [string, number][] = []): void {
    const g = this.graph;
    g.tag(GRAPH_NODE, WireType.LengthDelimited).fork();
    for (const i of inputs) g.tag(NODE_INPUT, WireType.LengthDelimited).string(i);
    for (const o of outputs) g.tag(NODE_OUTPUT, WireType.LengthDelimited).string(o);
    g.tag(NODE_NAME, WireType.LengthDelimited).string(`${op}_${this.nodes++}`);
    g.tag(NODE_OP_TYPE, WireType.LengthDelimited).string(op);
    for (const [name, value] of attributes) {
      g.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
      g.tag(ATTR_NAME, WireType.LengthDelimited).string(name);
      g.tag(ATTR_I, WireType.Varint).int64(value);
      g.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_INT);
      g.join();
    }
    g.join();
  }

  /** An int64 initializer: a 1-D tensor of `values`, or a scalar (0-D) with `scalar`. */
  int64s(name: string, values: readonly number[], scalar = false): void {
    this.initializer(name, DATA_INT64, new Uint8Array(BigInt64Array.from(values, BigInt).buffer), scalar ? [] : [values.length]);
  }

  /** A float32 initializer: a 1-D tensor of `values`, or a scalar (0-D) with `scalar`. */
  floats(name: string, values: readonly number[], scalar = false): void {
    this.initializer(name, DATA_FLOAT, new Uint8Array(Float32Array.from(values).buffer), scalar ? [] : [values.length]);
  }

  /** A float64 initializer: a 1-D tensor of `values`, or a scalar (0-D) with `scalar`. */
  doubles(name: string, values: readonly number[], scalar = false): void {
    this.initializer(name, DATA_DOUBLE, new Uint8Array(Float64Array.from(values).buffer), scalar ? [] : [values.length]);
  }

  private initializer(name: string, type: number, raw: Uint8Array, dims: number[]): void {
    const g = this.graph;
    g.tag(GRAPH_INITIALIZER, WireType.LengthDelimited).fork();
    for (const d of dims) g.tag(TENSOR_DIMS, WireType.Varint).int64(d);
    g.tag(TENSOR_DATA_TYPE, WireType.Varint).int32(type);
    g.tag(TENSOR_NAME, WireType.LengthDelimited).string(name);
    g.tag(TENSOR_RAW_DATA, WireType.LengthDelimited).bytes(raw);
    g.join();
  }

  /** A graph input or output of `elemType` (its shape left open: every dimension varies). */
  value(field: typeof GRAPH_INPUT | typeof GRAPH_OUTPUT, name: string, elemType: number): void {
    const g = this.graph;
    g.tag(field, WireType.LengthDelimited).fork();
    g.tag(VALUE_INFO_NAME, WireType.LengthDelimited).string(name);
    g.tag(VALUE_INFO_TYPE, WireType.LengthDelimited).fork();
    g.tag(TYPE_TENSOR, WireType.LengthDelimited).fork();
    g.tag(TENSOR_TYPE_ELEM_TYPE, WireType.Varint).int32(elemType);
    g.join().join().join();
  }

  model(): Uint8Array {
    const m = new BinaryWriter();
    m.tag(MODEL_IR_VERSION, WireType.Varint).int64(IR_VERSION);
    m.tag(MODEL_OPSET_IMPORT, WireType.LengthDelimited).fork();
    m.tag(1, WireType.LengthDelimited).string("");
    m.tag(2, WireType.Varint).int64(this.opset);
    m.join();
    m.tag(MODEL_GRAPH, WireType.LengthDelimited).bytes(this.graph.finish());
    return m.finish();
  }
}
