// The small ONNX graphs that move key/values between tensors on the device (device-kv.ts):
// no weights, a few copy operators each, run on the model's own execution provider so the
// key/values never leave the device.
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ATTR_I,
  ATTR_NAME,
  ATTR_TYPE,
  ATTR_TYPE_INT,
  DATA_FLOAT,
  DATA_INT64,
  GRAPH_INITIALIZER,
  GRAPH_INPUT,
  GRAPH_NAME,
  GRAPH_NODE,
  GRAPH_OUTPUT,
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
  TYPE_TENSOR,
  TENSOR_TYPE_ELEM_TYPE,
  VALUE_INFO_NAME,
  VALUE_INFO_TYPE,
} from "./onnx-proto.js";

const MODEL_IR_VERSION = 1;
const IR_VERSION = 8;
const OPSET = 17;

/** A graph under construction: nodes, inputs and outputs in the order added. */
class GraphWriter {
  private readonly graph = new BinaryWriter();
  private nodes = 0;

  constructor(name: string) {
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

  int64s(name: string, values: readonly number[]): void {
    const g = this.graph;
    g.tag(GRAPH_INITIALIZER, WireType.LengthDelimited).fork();
    g.tag(TENSOR_DIMS, WireType.Varint).int64(values.length);
    g.tag(TENSOR_DATA_TYPE, WireType.Varint).int32(DATA_INT64);
    g.tag(TENSOR_NAME, WireType.LengthDelimited).string(name);
    g.tag(TENSOR_RAW_DATA, WireType.LengthDelimited).bytes(new Uint8Array(BigInt64Array.from(values, BigInt).buffer));
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
    m.tag(2, WireType.Varint).int64(OPSET);
    m.join();
    m.tag(MODEL_GRAPH, WireType.LengthDelimited).bytes(this.graph.finish());
    return m.finish();
  }
}

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
