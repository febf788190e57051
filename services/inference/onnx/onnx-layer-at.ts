import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Field, fieldsOf, type GraphNode } from "./onnx-head.js";
import { intAttribute, int64Constant, node } from "./onnx-head-at.js";
import { NODE_INPUT, NODE_NAME, NODE_OUTPUT } from "./onnx-proto.js";

const utf8 = new TextDecoder();

/** The contract's `[B, S]` int64 inputs: the branch reads them for their shape only, and `at` has the narrowed one. */
const ROW_INPUTS = new Set(["input_ids", "position_ids"]);

/** Ops of shape arithmetic (a value computed from Shape through these only is a shape, not data). */
const SHAPE_OPS = new Set([
  "Shape",
  "Gather",
  "Unsqueeze",
  "Squeeze",
  "Concat",
  "Mul",
  "Add",
  "Sub",
  "Div",
  "Cast",
  "Slice",
  "Constant",
  "Identity",
]);

export interface LayerAt {
  /** Nodes that go first in the branch: the outer values it reads, at the asked positions only. */
  prelude: Uint8Array[];
  /** Outer value name → the branch's narrowed value, for the moved nodes' inputs. */
  renames: Map<string, string>;
}

/**
 * Narrows the whole branch of the head (onnx-head.ts moves there the nodes only `logits` needs:
 * for a decoder, the last layer's query, attention and MLP, the final norm and the head) to the
 * positions in `at` (int64 `[B, K]`, indices `b * S + s` into the forward's rows), so that a
 * readout forward computes its last layer at the answer slots only: only their hidden states
 * of that layer reach the logits. Its keys and values stay in the main graph, computed at every
 * position, as every position's query attends to them (and they are the present key/values).
 *
 * Each outer value the branch reads is sorted by what it is:
 * - constants (weights and what is computed from them alone) and the graph's other outputs
 *   (the last layer's present key/values, read whole) are read as they are;
 * - shapes (computed from Shape only) are computed again in the branch from the narrowed values,
 *   so a reshape to `[B, S, …]` becomes one to `[B, K, …]`;
 * - `input_ids`/`position_ids`, read for their shape only, are read as `at` (`[B, K]`);
 * - every other value is per position, `[B, 1…, S, F]` (hidden states, rotary tables, mask
 *   rows): its rows `s` of each batch row `b` are gathered (GatherND over `[B, S, F]`), the
 *   shape otherwise kept. A value with other leading dims fails at its reshape instead of
 *   being gathered wrongly.
 * Each narrowed position is computed from the same inputs by the same operations as before, so
 * the logits are those of the whole layer at those positions (onnx-head.test.ts compares them
 * with the unedited model). Returns undefined (the layer then stays whole) when the branch reads
 * something of another kind: a graph input other than those two, or one of those for more than
 * its shape.
 */
export function layerAtPositions(
  nodes: readonly (GraphNode & { field: Field })[],
  moved: ReadonlySet<number>,
  graph: { inputs: readonly string[]; outputs: readonly string[] },
  names: { at: string; prefix: string },
): LayerAt | undefined {
  const inputs = new Set(graph.inputs);
  const outputs = new Set(graph.outputs);
  // Values that depend on a graph input (the rest are constants), and of those, shapes.
  const dynamic = new Set<string>(graph.inputs);
  const shapes = new Set<string>();
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => {
    for (const o of n.outputs) if (o !== "") producer.set(o, i);
    const dynInputs = n.inputs.filter((x) => dynamic.has(x));
    if (dynInputs.length === 0) return;
    for (const o of n.outputs) dynamic.add(o);
    if (n.opType === "Shape" || (SHAPE_OPS.has(n.opType) && dynInputs.every((x) => shapes.has(x)))) {
      for (const o of n.outputs) shapes.add(o);
    }
  });

  const movedOutputs = new Set([...moved].flatMap((i) => nodes[i]!.outputs));
  const outer = new Set<string>();
  for (const i of moved) for (const x of nodes[i]!.inputs) if (x !== "" && !movedOutputs.has(x) && dynamic.has(x)) outer.add(x);

  const { at, prefix } = names;
  const prelude: Uint8Array[] = [];
  const renames = new Map<string, string>();
  const constant = (name: string, values: readonly bigint[]) => {
    const out = `${prefix}_${name}`;
    prelude.push(int64Constant(out, values));
    return out;
  };
  const zero = constant("zero", [0n]);
  const one = constant("one", [1n]);
  const two = constant("two", [2n]);
  const minusOne = constant("minus_one", [-1n]);
  const minusTwo = constant("minus_two", [-2n]);
  const end = constant("end", [2n ** 62n]);
  const atShape = `${prefix}_at_shape`;
  const k = `${prefix}_k`;
  prelude.push(node("Shape", [at], [atShape], `${atShape}_node`), node("Slice", [atShape, one, two], [k], `${k}_node`));

  // The positions within each row, [B, K, 1], from the first per-position value's S.
  let rowIndex: string | undefined;
  const narrowed = (value: string, n: number): string => {
    const p = `${prefix}_${n}`;
    const shape = `${p}_shape`;
    const [lead, seq, feature, middle] = [`${p}_lead`, `${p}_seq`, `${p}_feature`, `${p}_middle`];
    prelude.push(
      node("Shape", [value], [shape], `${shape}_node`),
      node("Slice", [shape, zero, one], [lead], `${lead}_node`),
      node("Slice", [shape, minusTwo, minusOne], [seq], `${seq}_node`),
      node("Slice", [shape, minusOne, end], [feature], `${feature}_node`),
      node("Slice", [shape, zero, minusTwo], [middle], `${middle}_node`),
    );
    if (rowIndex === undefined) {
      rowIndex = `${prefix}_row_index`;
      const within = `${prefix}_within_row`;
      const indexShape = `${prefix}_row_index_shape`;
      prelude.push(
        node("Mod", [at, seq], [within], `${within}_node`),
        node("Concat", [atShape, one], [indexShape], `${indexShape}_node`, (w) => intAttribute(w, "axis", 0)),
        node("Reshape", [within, indexShape], [rowIndex], `${rowIndex}_node`),
      );
    }
    const [flatShape, flat, gathered, outShape, out] = [`${p}_flat_shape`, `${p}_flat`, `${p}_gathered`, `${p}_out_shape`, `${p}_at`];
    prelude.push(
      node("Concat", [lead, seq, feature], [flatShape], `${flatShape}_node`, (w) => intAttribute(w, "axis", 0)),
      node("Reshape", [value, flatShape], [flat], `${flat}_node`),
      node("GatherND", [flat, rowIndex], [gathered], `${gathered}_node`, (w) => intAttribute(w, "batch_dims", 1)),
      node("Concat", [middle, k, feature], [outShape], `${outShape}_node`, (w) => intAttribute(w, "axis", 0)),
      node("Reshape", [gathered, outShape], [out], `${out}_node`),
    );
    return out;
  };

  // Per-position values first (shapes may be computed from them), then shapes.
  let count = 0;
  const shapeValues: string[] = [];
  for (const value of outer) {
    if (outputs.has(value)) continue;
    if (inputs.has(value)) {
      const readers = [...moved].filter((i) => nodes[i]!.inputs.includes(value));
      if (!ROW_INPUTS.has(value) || readers.some((i) => nodes[i]!.opType !== "Shape")) return undefined;
      renames.set(value, at);
    } else if (shapes.has(value)) {
      shapeValues.push(value);
    } else {
      renames.set(value, narrowed(value, count++));
    }
  }
  if (count === 0) return undefined;

  // Shapes: the nodes that compute them, again, reading the narrowed values.
  const needed = new Set<number>();
  const stack = [...shapeValues];
  while (stack.length > 0) {
    const i = producer.get(stack.pop()!);
    if (i === undefined || needed.has(i)) continue;
    needed.add(i);
    if (nodes[i]!.opType === "Shape") continue;
    for (const x of nodes[i]!.inputs) if (shapes.has(x)) stack.push(x);
  }
  const cloned = [...needed].sort((a, b) => a - b);
  const clonedName = (name: string) => `${prefix}_shape_${name}`;
  for (const i of cloned) for (const o of nodes[i]!.outputs) renames.set(o, clonedName(o));
  for (const i of cloned) {
    const n = nodes[i]!;
    if (n.opType === "Shape" && !renames.has(n.inputs[0]!)) return undefined;
    prelude.push(withNames(n.field.payload!, renames, clonedName));
  }
  for (const value of shapeValues) if (!renames.has(value)) return undefined;
  return { prelude, renames };
}

/** The node with its inputs renamed by `renames` and, when `output` is given, its outputs renamed by it. */
export function withNames(payload: Uint8Array, renames: ReadonlyMap<string, string>, output?: (name: string) => string): Uint8Array {
  const w = new BinaryWriter();
  for (const f of fieldsOf(payload)) {
    const name = f.payload === undefined ? undefined : utf8.decode(f.payload);
    if (f.field === NODE_INPUT && name !== undefined && renames.has(name)) {
      w.tag(NODE_INPUT, WireType.LengthDelimited).string(renames.get(name)!);
    } else if (f.field === NODE_OUTPUT && name !== undefined && output !== undefined && name !== "") {
      w.tag(NODE_OUTPUT, WireType.LengthDelimited).string(output(name));
    } else if (f.field === NODE_NAME && name !== undefined && output !== undefined) {
      w.tag(NODE_NAME, WireType.LengthDelimited).string(output(name));
    } else {
      w.raw(f.raw);
    }
  }
  return w.finish();
}
