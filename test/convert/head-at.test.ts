// The head narrowed to the answer slots (onnx-head-matmul-at.ts) on the converted tiny models:
// their heads are a MatMul on [B, S, H] (fp32, fp16), MatMulInteger after a per-tensor
// DynamicQuantizeLinear (int8), not the bundled model's Reshape(Gemm); MatMulNBits (int4) stays whole.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadModelDir, type ModelDir } from "../../services/inference/engine/model-dir.js";
import { createModelRuntime } from "../../services/inference/engine/runtime.js";
import { scoreSuffixes } from "../../services/inference/score/score.js";
import { HEAD_SWITCH, LOGITS_AT, withSkippableHead } from "../../services/inference/onnx/onnx-head.js";
import { type ConvertedFixtures, convertedFixtures, HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

interface Shape {
  layers: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
}

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

function shapeOf(dir: string): Shape {
  const c = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")) as Record<string, number>;
  return {
    layers: c.num_hidden_layers!,
    kvHeads: c.num_key_value_heads!,
    headDim: c.head_dim!,
    vocab: c.vocab_size!,
  };
}

/** Two rows of `seq` tokens after `past` slots of made-up key/values, block-causal (blocks of 4). */
function feeds(s: Shape, seq: number, past: number): Record<string, ort.Tensor> {
  const B = 2;
  const total = past + seq;
  const mask = new Float32Array(B * seq * total);
  for (let b = 0; b < B; b++)
    for (let i = 0; i < seq; i++)
      for (let j = 0; j < total; j++) mask[(b * seq + i) * total + j] = Math.floor(j / 4) <= Math.floor((past + i) / 4) ? 0 : -1e9;
  const f: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: B * seq }, (_, i) => BigInt(4 + ((i * 37) % 350))),
      [B, seq],
    ),
    position_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: B * seq }, (_, i) => BigInt(past + (i % seq))),
      [B, seq],
    ),
    attention_mask: new ort.Tensor("float32", mask, [B, 1, seq, total]),
  };
  for (let l = 0; l < s.layers; l++) {
    for (const kind of ["key", "value"]) {
      const kv = Float32Array.from({ length: B * s.kvHeads * past * s.headDim }, (_, i) => Math.sin(i + l + kind.length));
      f[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", kv, [B, s.kvHeads, past, s.headDim]);
    }
  }
  return f;
}

const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

const headOn = (at: number[], rows: number) => ({
  [HEAD_SWITCH]: new ort.Tensor("bool", [true], []),
  [LOGITS_AT]: new ort.Tensor("int64", BigInt64Array.from(at, BigInt), [rows, at.length / rows]),
});

const open = (model: Uint8Array | string, options: ort.InferenceSession.SessionOptions = {}) =>
  ort.InferenceSession.create(model as Uint8Array, { intraOpNumThreads: 1, graphOptimizationLevel: "all", ...options });

/** Output shapes of the kernels of `op` ONNX Runtime ran for one forward (its profile). */
async function profiledShapes(model: Uint8Array, f: Record<string, ort.Tensor>, op: string): Promise<number[][]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-head-at-profile-"));
  scratch.push(dir);
  const session = await open(model, { enableProfiling: true, profileFilePrefix: path.join(dir, "profile") });
  try {
    await session.run(f, ["logits"]);
    session.endProfiling();
  } finally {
    await session.release();
  }
  const events = JSON.parse(readFileSync(path.join(dir, readdirSync(dir)[0]!), "utf8")) as {
    cat?: string;
    name?: string;
    args?: { op_name?: string; output_type_shape?: Record<string, number[]>[] };
  }[];
  return events
    .filter((e) => e.cat === "Node" && e.name?.endsWith("_kernel_time") === true && e.args?.op_name === op)
    .map((e) => (e.args!.output_type_shape ?? []).flatMap((o) => Object.values(o))[0]!);
}

let fx: ConvertedFixtures;
beforeAll(async () => {
  if (HAVE_CONVERT_VENV) fx = await convertedFixtures();
}, 900_000);

describe.skipIf(!HAVE_CONVERT_VENV)("the converted models' head narrowed to the asked positions", () => {
  const cases = [
    ["sdar", "MatMul"],
    ["sdarFp16", "MatMul"],
    // ONNX Runtime fuses MatMulInteger, Cast and Mul into MatMulIntegerToFloat.
    ["sdarInt8", "MatMulIntegerToFloat"],
    ["fastDllm", "MatMul"],
  ] as const;
  for (const [name, headOp] of cases) {
    it(`${name}: the model file's logits at the asked positions, to the bit, from a ${headOp} at [K, V] only`, async () => {
      const dir = fx.models[name];
      const s = shapeOf(dir);
      const bytes = readFileSync(path.join(dir, "model.onnx"));
      const edited = withSkippableHead(bytes, s.vocab)!;
      expect(edited).toBeDefined();
      const original = await open(path.join(dir, "model.onnx"));
      const narrowed = await open(edited);
      try {
        expect(narrowed.inputNames).toContain(LOGITS_AT);
        const seq = 10;
        const f = feeds(s, seq, 8);
        const want = (await original.run(f)).logits!;
        const wantData = want.data as Float32Array;
        // Row 0's slots 9 and 2, row 1's slots 0 and 7 (indices b * S + s).
        const at = [9, 2, seq + 0, seq + 7];
        const got = (await narrowed.run({ ...f, ...headOn(at, 2) }, ["logits"])).logits!;
        expect(got.dims).toEqual([2, 2, s.vocab]);
        const data = got.data as Float32Array;
        at.forEach((position, k) => {
          const row = data.subarray(k * s.vocab, (k + 1) * s.vocab);
          const first = row.findIndex((x, v) => !Object.is(x, wantData[position * s.vocab + v]));
          expect(first, `position ${position}: first difference at ${first}`).toBe(-1);
        });
        // Every position in order: the whole [B, S, V], to the bit.
        const all = Array.from({ length: 2 * seq }, (_, i) => i);
        const whole = (await narrowed.run({ ...f, ...headOn(all, 2) }, ["logits"])).logits!;
        expect(whole.dims).toEqual(want.dims);
        expect(bytesOf(whole.data as Float32Array).equals(bytesOf(wantData))).toBe(true);

        // The head's product ran on the 4 asked rows only (ONNX Runtime's profile).
        const shapes = await profiledShapes(edited, { ...f, ...headOn(at, 2) }, headOp);
        const head = shapes.filter((d) => d[d.length - 1] === s.vocab);
        expect(head.map((d) => d.slice(0, -1).reduce((a, b) => a * b, 1))).toEqual([4]);
      } finally {
        await original.release();
        await narrowed.release();
      }
    });
  }

  /**
   * The session as a model without tessera_logits_at looks to the engine: every run computes
   * the head at every position ([B, S, V]), as the converted models were served before.
   */
  const wholeHead = (session: ort.InferenceSession): ort.InferenceSession =>
    new Proxy(session, {
      get(target, property) {
        if (property === "inputNames") return target.inputNames.filter((n) => n !== LOGITS_AT);
        if (property === "run") {
          return (f: Record<string, ort.Tensor>, ...rest: unknown[]) => {
            const [B, S] = f.input_ids!.dims as [number, number];
            const all = new ort.Tensor(
              "int64",
              BigInt64Array.from({ length: B * S }, (_, i) => BigInt(i)),
              [B, S],
            );
            return (target.run as (...a: unknown[]) => unknown)({ ...f, [LOGITS_AT]: all }, ...rest);
          };
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });

  it("sdarInt4: the head left whole (MatMulNBits' sums move in the last bits with the row count)", () => {
    const s = shapeOf(fx.models.sdarInt4);
    const edited = withSkippableHead(readFileSync(path.join(fx.models.sdarInt4, "model.onnx")), s.vocab)!;
    expect(Buffer.from(edited).includes(LOGITS_AT)).toBe(false);
  });

  for (const name of ["sdar", "sdarInt8", "fastDllm"] as const) {
    it(`${name}: the engine's decisions with the narrowed head equal those with the whole head`, async () => {
      const model = await loadModelDir(fx.models[name], { worker: false });
      try {
        expect(model.session.inputNames).toContain(LOGITS_AT);
        const runtime = (m: ModelDir) => createModelRuntime({ name, servingIds: [], model: m, slots: 4, queue: 4 });
        const narrowed = runtime(model);
        const whole = runtime({ ...model, session: wholeHead(model.session) });
        const input = {
          prefix: "Order A-1092: chairs before the desk, delivery next week. ".repeat(3),
          suffixes: [
            { text: "Should this order be expedited?", labels: ["yes", "no"] },
            { text: "Which carrier?", labels: ["post", "courier", "freight"] },
            { text: "How much effort?", labels: ["a", "b"] },
          ],
        };
        const want = await scoreSuffixes(whole, input);
        const got = await scoreSuffixes(narrowed, input);
        expect(got).toEqual(want);
      } finally {
        await model.close();
      }
    });
  }
});
