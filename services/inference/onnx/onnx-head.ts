import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { narrowedHead, quantizesPerTensor } from "./onnx-head-matmul-at.js";
import { layerAtPositions, withNames } from "./onnx-layer-at.js";
import { defaultOpset } from "./onnx-readout.js";
import {
  ATTR_G,
  ATTR_GRAPHS,
  ATTR_NAME,
  ATTR_T,
  ATTR_TYPE,
  ATTR_TYPE_GRAPH,
  ATTR_TYPE_GRAPHS,
  ATTR_TYPE_TENSOR,
  concatBytes,
  DATA_BOOL,
  DATA_FLOAT,
  DATA_INT64,
  GRAPH_INPUT,
  GRAPH_NAME,
  GRAPH_NODE,
  GRAPH_OUTPUT,
  GRAPH_VALUE_INFO,
  MODEL_GRAPH,
  NODE_ATTRIBUTE,
  NODE_INPUT,
  NODE_NAME,
  NODE_OP_TYPE,
  NODE_OUTPUT,
  TENSOR_DATA_TYPE,
  TENSOR_DIMS,
  TENSOR_NAME,
  TENSOR_TYPE_ELEM_TYPE,
  TENSOR_TYPE_SHAPE,
  TYPE_TENSOR,
  VALUE_INFO_NAME,
  VALUE_INFO_TYPE,
} from "./onnx-proto.js";

/**
 * The boolean scalar input the engine adds to a contract model: `true` computes the logits
 * as before, `false` skips the output head (the logits come back empty, `[0, 0, V]`).
 */
export const HEAD_SWITCH = "tessera_compute_logits";

/**
 * The int64 `[B, K]` input the engine adds beside HEAD_SWITCH when the head has the form it
 * can narrow (see headAtPositions): the positions, as indices into the forward's `B * S`
 * rows (`b * S + s`), whose logits the head computes. The logits come back `[B, K, V]`; all
 * positions in order (`b * S + s` for every s) give the full `[B, S, V]`. Row b's indices
 * must be positions of batch row b (the narrowed last layer, onnx-layer-at.ts, reads them as
 * `s` within row b).
 */
export const LOGITS_AT = "tessera_logits_at";

const LOGITS = "logits";
const PREFIX = "tessera_head";
const HEAD_LOGITS = `${PREFIX}_logits`;
const SKIPPED = `${PREFIX}_skipped`;

/**
 * Makes the output head conditional, so a forward that reads only the present key/values (a
 * prefill) does not pay for it. ONNX Runtime runs every node of the graph whatever outputs a
 * run fetches (onnxruntime issues 3128, 16483: pruning by fetches is in training builds only),
 * so the work that only `logits` needs moves into an `If` on HEAD_SWITCH:
 *
 *   logits = If(tessera_compute_logits,
 *               then: the nodes only `logits` depends on,
 *               else: an empty [0, 0, V] constant)
 *
 * "Only `logits` depends on" is computed, not assumed: the nodes `logits` needs minus those
 * any other graph output needs. For a decoder that is the final norm and the LM head, and
 * also the last layer's query, attention output and MLP (its present key/values need only
 * its key and value projections). The moved nodes read the main graph's values and weights
 * from the outer scope, so nothing is copied or loaded twice, and they compute exactly what
 * they computed before: the logits and the present key/values are the same to the bit.
 *
 * The model is rewritten at the protobuf wire level: the main graph's fields are kept as
 * they are (initializers are copied, never parsed), the moved nodes and their value_info
 * leave it, and the `If` node and the new input are appended. Returns undefined, leaving the
 * model as it is, when the model is not one this can rewrite safely: opset < 11 (If with
 * differently shaped branches), not exactly one graph, no `logits` output produced by a node,
 * a node that already holds a subgraph (its outer-scope reads are not traced here), a node
 * that stays but reads a value that would move, or names of ours already in use.
 */
export function withSkippableHead(model: Uint8Array, vocab: number): Uint8Array | undefined {
  const parts = skippableHeadParts(model, vocab);
  return parts === undefined ? undefined : concatBytes(parts);
}

/**
 * withSkippableHead's model as chunks, mostly views of `model` (so a caller that edits the
 * model otherwise too can assemble the result in one copy).
 */
export function skippableHeadParts(model: Uint8Array, vocab: number): Uint8Array[] | undefined {
  const opset = defaultOpset(model);
  if (opset === undefined || opset < 11) return undefined;
  const top = fieldsOf(model);
  const graphs = top.filter((f) => f.field === MODEL_GRAPH && f.payload !== undefined);
  if (graphs.length !== 1) return undefined;
  const graph = rewriteGraph(graphs[0]!.payload!, vocab);
  if (graph === undefined) return undefined;
  const graphLength = graph.reduce((n, c) => n + c.length, 0);
  const header = new BinaryWriter().tag(MODEL_GRAPH, WireType.LengthDelimited).uint32(graphLength).finish();
  return top.flatMap((f) => (f === graphs[0] ? [header, ...graph] : [f.raw]));
}

/** The rewritten graph's payload, as chunks (mostly views of the original bytes). */
function rewriteGraph(graph: Uint8Array, vocab: number): Uint8Array[] | undefined {
  const fields = fieldsOf(graph);
  const nodes = fields.filter((f) => f.field === GRAPH_NODE && f.payload !== undefined).map((f) => ({ field: f, ...nodeOf(f.payload!) }));
  if (nodes.some((n) => n.nested)) return undefined;
  const outputs = fields
    .filter((f) => f.field === GRAPH_OUTPUT && f.payload !== undefined)
    .map((f) => ({ field: f, name: valueInfoName(f.payload!) }));
  const inputs = fields.filter((f) => f.field === GRAPH_INPUT && f.payload !== undefined).map((f) => valueInfoName(f.payload!));
  const logits = outputs.find((o) => o.name === LOGITS);
  if (logits === undefined) return undefined;
  const ours = (name: string) => name === HEAD_SWITCH || name === LOGITS_AT || name.startsWith(PREFIX);
  if (inputs.some(ours) || nodes.some((n) => n.inputs.some(ours) || n.outputs.some(ours))) return undefined;

  const producer = new Map<string, number>();
  nodes.forEach((n, i) => {
    for (const o of n.outputs) if (o !== "") producer.set(o, i);
  });
  const cone = (roots: string[]): Set<number> => {
    const seen = new Set<number>();
    const stack = [...roots];
    while (stack.length > 0) {
      const i = producer.get(stack.pop()!);
      if (i === undefined || seen.has(i)) continue;
      seen.add(i);
      for (const input of nodes[i]!.inputs) if (input !== "") stack.push(input);
    }
    return seen;
  };
  const others = cone(outputs.filter((o) => o !== logits).map((o) => o.name));
  const logitsProducer = producer.get(LOGITS);
  if (logitsProducer === undefined || others.has(logitsProducer)) return undefined;
  const moved = new Set([...cone([LOGITS])].filter((i) => !others.has(i)));
  const movedValues = new Set([...moved].flatMap((i) => nodes[i]!.outputs));
  // A node left behind (one no output needs) must not read what moves into the branch (the
  // If's output keeps the name `logits`).
  if (nodes.some((n, i) => !moved.has(i) && n.inputs.some((input) => input !== LOGITS && movedValues.has(input)))) return undefined;
  const movedValueInfo = fields.filter(
    (f) => f.field === GRAPH_VALUE_INFO && f.payload !== undefined && movedValues.has(valueInfoName(f.payload)),
  );

  const headNames = { at: LOGITS_AT, prefix: PREFIX, output: HEAD_LOGITS };
  let narrowed = narrowedHead(nodes, moved, logitsProducer, headNames);
  // The whole branch (the last layer's query, attention and MLP too) at those positions only.
  const layer =
    narrowed === undefined || quantizesPerTensor(nodes, moved)
      ? undefined
      : layerAtPositions(
          nodes,
          moved,
          { inputs, outputs: outputs.map((o) => o.name).filter((name) => name !== LOGITS) },
          { at: LOGITS_AT, prefix: `${PREFIX}_layer` },
        );
  if (layer !== undefined) narrowed = narrowedHead(nodes, moved, logitsProducer, { ...headNames, gather: false });
  const thenBranch = new BinaryWriter();
  for (const payload of layer?.prelude ?? []) thenBranch.tag(GRAPH_NODE, WireType.LengthDelimited).bytes(payload);
  nodes.forEach((n, i) => {
    if (!moved.has(i)) return;
    const payloads = narrowed?.get(i) ?? [i === logitsProducer ? renamedOutput(n.field.payload!, LOGITS, HEAD_LOGITS) : n.field.payload!];
    for (const payload of payloads) {
      thenBranch.tag(GRAPH_NODE, WireType.LengthDelimited).bytes(layer === undefined ? payload : withNames(payload, layer.renames));
    }
  });
  thenBranch.tag(GRAPH_NAME, WireType.LengthDelimited).string(`${PREFIX}_then`);
  thenBranch.tag(GRAPH_OUTPUT, WireType.LengthDelimited).bytes(renamedValueInfo(logits.field.payload!, HEAD_LOGITS));
  // A narrowed branch's values have K positions where their value_info says S.
  if (layer === undefined) for (const f of movedValueInfo) thenBranch.tag(GRAPH_VALUE_INFO, WireType.LengthDelimited).bytes(f.payload!);

  const elemType = tensorElemType(logits.field.payload!) ?? DATA_FLOAT;
  const elseBranch = new BinaryWriter();
  elseBranch.tag(GRAPH_NODE, WireType.LengthDelimited).fork();
  elseBranch.tag(NODE_OUTPUT, WireType.LengthDelimited).string(SKIPPED);
  elseBranch.tag(NODE_NAME, WireType.LengthDelimited).string(`${PREFIX}_empty`);
  elseBranch.tag(NODE_OP_TYPE, WireType.LengthDelimited).string("Constant");
  elseBranch.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
  elseBranch.tag(ATTR_NAME, WireType.LengthDelimited).string("value");
  elseBranch.tag(ATTR_T, WireType.LengthDelimited).fork();
  // [0, 0, V]: no data, and the readout's `logits + banned[V]` still broadcasts.
  for (const d of [0, 0, vocab]) elseBranch.tag(TENSOR_DIMS, WireType.Varint).int64(d);
  elseBranch.tag(TENSOR_DATA_TYPE, WireType.Varint).int32(elemType);
  elseBranch.tag(TENSOR_NAME, WireType.LengthDelimited).string(`${PREFIX}_empty_value`);
  elseBranch.join();
  elseBranch.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_TENSOR);
  elseBranch.join().join();
  elseBranch.tag(GRAPH_NAME, WireType.LengthDelimited).string(`${PREFIX}_else`);
  elseBranch.tag(GRAPH_OUTPUT, WireType.LengthDelimited).bytes(tensorValueInfo(SKIPPED, elemType, false));

  const added = new BinaryWriter();
  added.tag(GRAPH_NODE, WireType.LengthDelimited).fork();
  added.tag(NODE_INPUT, WireType.LengthDelimited).string(HEAD_SWITCH);
  added.tag(NODE_OUTPUT, WireType.LengthDelimited).string(LOGITS);
  added.tag(NODE_NAME, WireType.LengthDelimited).string(`${PREFIX}_if`);
  added.tag(NODE_OP_TYPE, WireType.LengthDelimited).string("If");
  for (const [name, branch] of [
    ["then_branch", thenBranch],
    ["else_branch", elseBranch],
  ] as const) {
    added.tag(NODE_ATTRIBUTE, WireType.LengthDelimited).fork();
    added.tag(ATTR_NAME, WireType.LengthDelimited).string(name);
    added.tag(ATTR_G, WireType.LengthDelimited).bytes(branch.finish());
    added.tag(ATTR_TYPE, WireType.Varint).int32(ATTR_TYPE_GRAPH);
    added.join();
  }
  added.join();
  added.tag(GRAPH_INPUT, WireType.LengthDelimited).bytes(tensorValueInfo(HEAD_SWITCH, DATA_BOOL, true));
  if (narrowed !== undefined) added.tag(GRAPH_INPUT, WireType.LengthDelimited).bytes(tensorValueInfo(LOGITS_AT, DATA_INT64, false));

  const movedFields = new Set([...[...moved].map((i) => nodes[i]!.field), ...movedValueInfo]);
  return [...fields.filter((f) => !movedFields.has(f)).map((f) => f.raw), added.finish()];
}

export interface Field {
  field: number;
  /** The whole field, tag included. */
  raw: Uint8Array;
  /** A length-delimited field's content. */
  payload?: Uint8Array;
}

/** The top-level fields of a message, as views of its bytes. */
export function fieldsOf(message: Uint8Array): Field[] {
  const reader = new BinaryReader(message);
  const fields: Field[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [field, wireType] = reader.tag();
    if (wireType === WireType.LengthDelimited) {
      const payload = reader.bytes();
      fields.push({ field, raw: message.subarray(start, reader.pos), payload });
    } else {
      reader.skip(wireType, field);
      fields.push({ field, raw: message.subarray(start, reader.pos) });
    }
  }
  return fields;
}

const utf8 = new TextDecoder();

export interface GraphNode {
  field: Field;
  inputs: string[];
  outputs: string[];
  opType: string;
  nested: boolean;
}

function nodeOf(node: Uint8Array): Omit<GraphNode, "field"> {
  const inputs: string[] = [];
  const outputs: string[] = [];
  let opType = "";
  let nested = false;
  for (const f of fieldsOf(node)) {
    if (f.payload === undefined) continue;
    if (f.field === NODE_INPUT) inputs.push(utf8.decode(f.payload));
    else if (f.field === NODE_OUTPUT) outputs.push(utf8.decode(f.payload));
    else if (f.field === NODE_OP_TYPE) opType = utf8.decode(f.payload);
    else if (f.field === NODE_ATTRIBUTE) nested ||= holdsGraph(f.payload);
  }
  return { inputs, outputs, opType, nested };
}

function holdsGraph(attribute: Uint8Array): boolean {
  const reader = new BinaryReader(attribute);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === ATTR_G || field === ATTR_GRAPHS) return true;
    if (field === ATTR_TYPE && wireType === WireType.Varint) {
      const type = reader.int32();
      if (type === ATTR_TYPE_GRAPH || type === ATTR_TYPE_GRAPHS) return true;
    } else {
      reader.skip(wireType, field);
    }
  }
  return false;
}

/** The names of the model's graph outputs (read at the wire level, the weights untouched). */
export function graphOutputNames(model: Uint8Array): string[] {
  const graph = fieldsOf(model).find((f) => f.field === MODEL_GRAPH && f.payload !== undefined);
  if (graph === undefined) return [];
  return fieldsOf(graph.payload!)
    .filter((f) => f.field === GRAPH_OUTPUT && f.payload !== undefined)
    .map((f) => valueInfoName(f.payload!));
}

function valueInfoName(valueInfo: Uint8Array): string {
  const name = fieldsOf(valueInfo).find((f) => f.field === VALUE_INFO_NAME && f.payload !== undefined);
  return name === undefined ? "" : utf8.decode(name.payload);
}

/** A ValueInfoProto's tensor element type, when it declares one. */
function tensorElemType(valueInfo: Uint8Array): number | undefined {
  const type = fieldsOf(valueInfo).find((f) => f.field === VALUE_INFO_TYPE)?.payload;
  const tensor = type && fieldsOf(type).find((f) => f.field === TYPE_TENSOR)?.payload;
  if (tensor === undefined) return undefined;
  const reader = new BinaryReader(tensor);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === TENSOR_TYPE_ELEM_TYPE && wireType === WireType.Varint) return reader.int32();
    reader.skip(wireType, field);
  }
  return undefined;
}

function tensorValueInfo(name: string, elemType: number, scalar: boolean): Uint8Array {
  const w = new BinaryWriter();
  w.tag(VALUE_INFO_NAME, WireType.LengthDelimited).string(name);
  w.tag(VALUE_INFO_TYPE, WireType.LengthDelimited).fork();
  w.tag(TYPE_TENSOR, WireType.LengthDelimited).fork();
  w.tag(TENSOR_TYPE_ELEM_TYPE, WireType.Varint).int32(elemType);
  if (scalar) w.tag(TENSOR_TYPE_SHAPE, WireType.LengthDelimited).bytes(new Uint8Array(0));
  w.join().join();
  return w.finish();
}

export function renamedOutput(node: Uint8Array, from: string, to: string): Uint8Array {
  const w = new BinaryWriter();
  for (const f of fieldsOf(node)) {
    if (f.field === NODE_OUTPUT && f.payload !== undefined && utf8.decode(f.payload) === from) {
      w.tag(NODE_OUTPUT, WireType.LengthDelimited).string(to);
    } else {
      w.raw(f.raw);
    }
  }
  return w.finish();
}

function renamedValueInfo(valueInfo: Uint8Array, to: string): Uint8Array {
  const w = new BinaryWriter();
  for (const f of fieldsOf(valueInfo)) {
    if (f.field === VALUE_INFO_NAME) w.tag(VALUE_INFO_NAME, WireType.LengthDelimited).string(to);
    else w.raw(f.raw);
  }
  return w.finish();
}
