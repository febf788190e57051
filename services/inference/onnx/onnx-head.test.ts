// The conditional output head (onnx-head.ts) on the tiny model: the same logits and present
// key/values to the bit as the model file, none of the head's nodes run when it is off (ONNX
// Runtime's own profile), the runner switches it off for prefills only, and models it cannot
// rewrite are left as they are.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { createOrtRunner, type ForwardInputs, type LayerKV } from "../decoder/forward.js";
import { kvShapeOf } from "../engine/runtime.js";
import { loadModelDir, type ModelDir } from "../engine/model-dir.js";
import { HEAD_SWITCH, LOGITS_AT, withSkippableHead } from "./onnx-head.js";
import { withReadout } from "./onnx-readout.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";

const MODEL_FILE = path.join(TINY_MODEL_DIR, "model.onnx");
const LAYERS = 2;
const KV_HEADS = 2;
const HEAD_DIM = 16;
const VOCAB = 687;
const PRESENT = Array.from({ length: LAYERS }, (_, l) => [`present.${l}.key`, `present.${l}.value`]).flat();

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

function open(model: Uint8Array, options: ort.InferenceSession.SessionOptions = {}): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(model, { intraOpNumThreads: 1, graphOptimizationLevel: "all", ...options });
}

/** A block-causal forward of `seq` tokens after `past` slots of made-up key/values. */
function feeds(seq: number, past: number): Record<string, ort.Tensor> {
  const total = past + seq;
  const mask = new Float32Array(seq * total);
  for (let i = 0; i < seq; i++) {
    for (let j = 0; j < total; j++) mask[i * total + j] = Math.floor(j / 64) <= Math.floor((past + i) / 64) ? 0 : -1e9;
  }
  const f: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: seq }, (_, i) => BigInt(4 + ((i * 37) % 600))),
      [1, seq],
    ),
    position_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: seq }, (_, i) => BigInt(past + i)),
      [1, seq],
    ),
    attention_mask: new ort.Tensor("float32", mask, [1, 1, seq, total]),
  };
  for (const name of PRESENT) {
    const kv = Float32Array.from({ length: KV_HEADS * past * HEAD_DIM }, (_, i) => Math.sin(i + name.length));
    f[name.replace("present", "past_key_values")] = new ort.Tensor("float32", kv, [1, KV_HEADS, past, HEAD_DIM]);
  }
  return f;
}

/** The head on, at `at` (indices into the forward's positions; all `seq` of one row by default). */
const headOn = (seq: number, at: readonly number[] = Array.from({ length: seq }, (_, i) => i)) => ({
  [HEAD_SWITCH]: new ort.Tensor("bool", Uint8Array.of(1), []),
  [LOGITS_AT]: new ort.Tensor("int64", BigInt64Array.from(at, BigInt), [1, at.length]),
});
const headOff = () => ({
  [HEAD_SWITCH]: new ort.Tensor("bool", Uint8Array.of(0), []),
  [LOGITS_AT]: new ort.Tensor("int64", new BigInt64Array(0), [1, 0]),
});

/** Bit-for-bit equality (NaN and -0 included), with a short message on the first difference. */
function expectSameBits(got: ort.Tensor, want: ort.Tensor, what: string): void {
  expect(got.dims, what).toEqual(want.dims);
  const a = got.data as Float32Array;
  const b = want.data as Float32Array;
  const first = a.findIndex((x, i) => !Object.is(x, b[i]));
  expect(first, `${what}: first difference at ${first}`).toBe(-1);
}

describe("withSkippableHead", () => {
  let original: ort.InferenceSession;
  let edited: ort.InferenceSession;
  beforeAll(async () => {
    const bytes = readFileSync(MODEL_FILE);
    original = await open(bytes);
    edited = await open(withSkippableHead(bytes, VOCAB)!);
  });
  afterAll(async () => {
    await original?.release();
    await edited?.release();
  });

  it("adds a boolean switch and keeps the contract's inputs and outputs", () => {
    expect(edited.inputNames).toEqual([...original.inputNames, HEAD_SWITCH, LOGITS_AT]);
    expect(edited.outputNames).toEqual(original.outputNames);
  });

  for (const [seq, past] of [
    [150, 0],
    [64, 128],
  ] as const) {
    it(`gives the model's logits and key/values to the bit when on, the same key/values and no logits when off (${seq} tokens after ${past})`, async () => {
      const f = feeds(seq, past);
      const want = await original.run(f);
      const on = await edited.run({ ...f, ...headOn(seq) });
      const off = await edited.run({ ...f, ...headOff() });
      expectSameBits(on.logits!, want.logits!, "logits");
      expect(off.logits!.dims).toEqual([0, 0, VOCAB]);
      for (const name of PRESENT) {
        expectSameBits(on[name]!, want[name]!, `${name} (on)`);
        expectSameBits(off[name]!, want[name]!, `${name} (off)`);
      }
    });
  }

  it("computes the head at the positions asked for only: the unedited model's logits there, to the bit", async () => {
    const f = feeds(150, 0);
    const want = (await original.run(f)).logits!.data as Float32Array;
    const at = [149, 3, 64, 3];
    const got = await edited.run({ ...f, ...headOn(150, at) });
    expect(got.logits!.dims).toEqual([1, at.length, VOCAB]);
    const data = got.logits!.data as Float32Array;
    at.forEach((position, k) => {
      const row = data.subarray(k * VOCAB, (k + 1) * VOCAB);
      const first = row.findIndex((x, v) => !Object.is(x, want[position * VOCAB + v]));
      expect(first, `position ${position}: first difference at ${first}`).toBe(-1);
    });
  });

  /** The kernels ONNX Runtime ran for one forward (its profile): op and output shapes, in order. */
  const profiled = async (feedsOfRun: Record<string, ort.Tensor>): Promise<{ op: string; shapes: number[][] }[]> => {
    const bytes = withSkippableHead(readFileSync(MODEL_FILE), VOCAB)!;
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-head-profile-"));
    scratch.push(dir);
    const session = await open(bytes, { enableProfiling: true, profileFilePrefix: path.join(dir, "profile") });
    try {
      await session.run(feedsOfRun, PRESENT);
      session.endProfiling();
    } finally {
      await session.release();
    }
    const [file] = readdirSync(dir);
    const events = JSON.parse(readFileSync(path.join(dir, file!), "utf8")) as {
      cat?: string;
      name?: string;
      args?: { op_name?: string; output_type_shape?: Record<string, number[]>[] };
    }[];
    return events
      .filter((e) => e.cat === "Node" && e.name?.endsWith("_kernel_time") === true && e.args?.op_name !== undefined)
      .map((e) => ({ op: e.args!.op_name!, shapes: (e.args!.output_type_shape ?? []).flatMap((o) => Object.values(o)) }));
  };

  it("runs none of the nodes only the logits need when off: no LM head, no last-layer MLP (ONNX Runtime's profile)", async () => {
    const ops = async (switchOn: boolean): Promise<Record<string, number>> => {
      const counts: Record<string, number> = {};
      for (const { op } of await profiled({ ...feeds(32, 0), ...(switchOn ? headOn(32) : headOff()) })) counts[op] = (counts[op] ?? 0) + 1;
      return counts;
    };
    const on = await ops(true);
    const off = await ops(false);
    // The tiny model's only Gemm is the LM head; QuickGelu is the (fused) MLP activation of each layer.
    expect(on.Gemm).toBe(1);
    expect(off.Gemm).toBeUndefined();
    expect(on.QuickGelu).toBe(LAYERS);
    expect(off.QuickGelu).toBe(LAYERS - 1);
    expect(off.MatMul!).toBeLessThan(on.MatMul!);
    expect(off.If).toBe(1);
  });

  it("computes the last layer's MLP at the asked positions only, the other layers' at every position (ONNX Runtime's profile)", async () => {
    // QuickGelu is each layer's (fused) MLP activation, [B, positions, intermediate].
    const gelu = (await profiled({ ...feeds(150, 0), ...headOn(150, [149, 3]) })).filter((k) => k.op === "QuickGelu");
    expect(gelu.map((k) => k.shapes[0]!.slice(0, 2))).toEqual([...Array.from({ length: LAYERS - 1 }, () => [1, 150]), [1, 2]]);
  });

  it("composes with the greedy readout, which reads empty logits when the head is off", async () => {
    const session = await open(withReadout(withSkippableHead(readFileSync(MODEL_FILE), VOCAB)!, VOCAB, [1, 0])!);
    try {
      const off = await session.run({ ...feeds(20, 0), ...headOff() });
      // Empty (ONNX Runtime's ArgMax keeps the reduced axis of an empty input; nobody reads it).
      expect(off.tessera_readout_token!.size).toBe(0);
      expect(off.tessera_readout_confidence!.size).toBe(0);
      const on = await session.run({ ...feeds(20, 0), ...headOn(20) });
      expect(on.tessera_readout_token!.dims).toEqual([1, 20]);
    } finally {
      await session.release();
    }
  });

  it("leaves as they are the models it cannot rewrite safely", () => {
    const bytes = readFileSync(MODEL_FILE);
    // Already rewritten: its names are taken.
    expect(withSkippableHead(withSkippableHead(bytes, VOCAB)!, VOCAB)).toBeUndefined();
    const model = (opset: number, graph: (g: BinaryWriter) => void) => {
      const w = new BinaryWriter();
      w.tag(8, WireType.LengthDelimited).fork().tag(2, WireType.Varint).int64(opset).join();
      w.tag(7, WireType.LengthDelimited).fork();
      graph(w);
      return w.join().finish();
    };
    const node = (g: BinaryWriter, op: string, inputs: string[], outputs: string[]) => {
      g.tag(1, WireType.LengthDelimited).fork();
      for (const i of inputs) g.tag(1, WireType.LengthDelimited).string(i);
      for (const o of outputs) g.tag(2, WireType.LengthDelimited).string(o);
      g.tag(4, WireType.LengthDelimited).string(op);
      g.join();
    };
    const output = (g: BinaryWriter, name: string) =>
      g.tag(12, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(name).join();
    const twoOutputs = (g: BinaryWriter) => {
      node(g, "Relu", ["x"], ["h"]);
      node(g, "Neg", ["h"], ["logits"]);
      node(g, "Abs", ["h"], ["present.0.key"]);
      output(g, "logits");
      output(g, "present.0.key");
    };
    // The rewritable shape itself, so the refusals below are for the reason each names.
    expect(withSkippableHead(model(17, twoOutputs), 8)).toBeDefined();
    // Opset 10: If's branches must agree on shapes.
    expect(withSkippableHead(model(10, twoOutputs), 8)).toBeUndefined();
    // No logits output.
    expect(
      withSkippableHead(
        model(17, (g) => {
          node(g, "Relu", ["x"], ["y"]);
          output(g, "y");
        }),
        8,
      ),
    ).toBeUndefined();
    // The logits are an input, not a node's output.
    expect(
      withSkippableHead(
        model(17, (g) => output(g, "logits")),
        8,
      ),
    ).toBeUndefined();
    // Another output needs the logits: nothing can be skipped.
    expect(
      withSkippableHead(
        model(17, (g) => {
          node(g, "Relu", ["x"], ["logits"]);
          node(g, "Abs", ["logits"], ["present.0.key"]);
          output(g, "logits");
          output(g, "present.0.key");
        }),
        8,
      ),
    ).toBeUndefined();
    // A node no output needs reads a value inside the head: it would be left without it (reading `logits` itself is fine).
    const deadReader = (read: string) => (g: BinaryWriter) => {
      node(g, "Relu", ["x"], ["h"]);
      node(g, "Exp", ["h"], ["e"]);
      node(g, "Neg", ["e"], ["logits"]);
      node(g, "Abs", ["h"], ["present.0.key"]);
      node(g, "Identity", [read], ["unused"]);
      output(g, "logits");
      output(g, "present.0.key");
    };
    expect(withSkippableHead(model(17, deadReader("e")), 8)).toBeUndefined();
    expect(withSkippableHead(model(17, deadReader("logits")), 8)).toBeDefined();
    // A node with a subgraph: its outer-scope reads are not traced.
    expect(
      withSkippableHead(
        model(17, (g) => {
          twoOutputs(g);
          g.tag(1, WireType.LengthDelimited).fork();
          g.tag(1, WireType.LengthDelimited)
            .string("c")
            .tag(2, WireType.LengthDelimited)
            .string("z")
            .tag(4, WireType.LengthDelimited)
            .string("If");
          g.tag(5, WireType.LengthDelimited)
            .fork()
            .tag(1, WireType.LengthDelimited)
            .string("then_branch")
            .tag(20, WireType.Varint)
            .int32(5)
            .join();
          g.join();
        }),
        8,
      ),
    ).toBeUndefined();
  });
});

describe("the ONNX Runtime runner", () => {
  let model: ModelDir;
  beforeAll(async () => {
    model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1, worker: false });
  });
  afterAll(async () => {
    await model?.close();
  });

  it("switches the head off on a prefill and fetches only the present key/values, the same bits as with the head", async () => {
    expect(model.skippableHead).toBe(true);
    expect(model.session.inputNames).toContain(LOGITS_AT);
    const runs: { fetches: readonly string[]; head: number | undefined }[] = [];
    const session = model.session;
    const recording = {
      inputNames: session.inputNames,
      outputNames: session.outputNames,
      run: (f: ort.InferenceSession.FeedsType, fetches: readonly string[]) => {
        runs.push({ fetches: [...fetches], head: (f[HEAD_SWITCH]?.data as Uint8Array | undefined)?.[0] });
        return session.run(f, fetches);
      },
    } as unknown as ort.InferenceSession;
    const runner = createOrtRunner(recording, kvShapeOf(model));
    const f = feeds(128, 64);
    const inputs: ForwardInputs = {
      batch: 1,
      seq: 128,
      past: 64,
      inputIds: f.input_ids!.data as BigInt64Array,
      positionIds: f.position_ids!.data as BigInt64Array,
      attentionMask: f.attention_mask!.data as Float32Array,
      pastKeyValues: Array.from({ length: LAYERS }, (_, l) => ({
        key: f[`past_key_values.${l}.key`]!.data as Float32Array,
        value: f[`past_key_values.${l}.value`]!.data as Float32Array,
      })),
    };

    const prefill = await runner.run(inputs, { present: true, output: "none" });
    const step = await runner.run(inputs, { present: true, output: "readout" });
    const score = await runner.run(inputs, { present: false, output: "logits" });
    expect(runs).toEqual([
      { fetches: PRESENT, head: 0 },
      { fetches: ["tessera_readout_confidence", "tessera_readout_token", ...PRESENT], head: 1 },
      { fetches: ["logits"], head: 1 },
    ]);
    runs.length = 0;
    expect(prefill.logits).toBeUndefined();
    expect(prefill.readout).toBeUndefined();
    expect(step.readout!.token).toHaveLength(128);
    expect(score.logits).toHaveLength(128 * VOCAB);
    (prefill.present as LayerKV[]).forEach((layer, l) => {
      expect(layer.key).toEqual((step.present as LayerKV[])[l]!.key);
      expect(layer.value).toEqual((step.present as LayerKV[])[l]!.value);
    });
    // A readout forward's head at two positions only: those positions' logits, to the bit.
    const narrow = await runner.run(
      { ...inputs, logitsAt: { indices: BigInt64Array.of(127n, 5n), perRow: 2 } },
      { present: false, output: "logits" },
    );
    expect(narrow.logits).toEqual(
      Float32Array.of(...score.logits!.subarray(127 * VOCAB, 128 * VOCAB), ...score.logits!.subarray(5 * VOCAB, 6 * VOCAB)),
    );
    await expect(runner.run(inputs, { present: false, output: "none" })).rejects.toThrow(/fetch something/);
  });
});
