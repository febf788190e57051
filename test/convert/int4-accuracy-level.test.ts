import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { int4AccuracyLevel, loadModelDir } from "../../services/inference/engine/model-dir.js";
import { matMulNBitsAccuracyLevels, withMatMulNBitsAccuracy } from "../../services/inference/onnx/onnx-accuracy-level.js";
import {
  type ConvertedFixtures,
  convertedFixtures,
  HAVE_CONVERT_VENV,
  NO_VENV_MESSAGE,
  runConvertPython,
} from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

/** One forward of 4 tokens at context 0 on the CPU; the logits. */
async function logits(model: Uint8Array, config: { numLayers: number; numKvHeads: number; headDim: number }): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model, { executionProviders: ["cpu"], intraOpNumThreads: 1 });
  try {
    const s = 4;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", BigInt64Array.from([11n, 42n, 7n, 99n]), [1, s]),
      position_ids: new ort.Tensor("int64", BigInt64Array.from([0n, 1n, 2n, 3n]), [1, s]),
      attention_mask: new ort.Tensor("float32", new Float32Array(s * s), [1, 1, s, s]),
    };
    for (let l = 0; l < config.numLayers; l++) {
      for (const kv of ["key", "value"]) {
        feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, config.numKvHeads, 0, config.headDim]);
      }
    }
    const out = await session.run(feeds, ["logits"]);
    return out.logits!.data as Float32Array;
  } finally {
    await session.release();
  }
}

function relativeRms(a: Float32Array, b: Float32Array): number {
  let diff = 0;
  let ref = 0;
  for (let i = 0; i < a.length; i++) {
    diff += (a[i]! - b[i]!) ** 2;
    ref += b[i]! ** 2;
  }
  return Math.sqrt(diff / ref);
}

describe.skipIf(!HAVE_CONVERT_VENV)("MatMulNBits accuracy level chosen at load by the execution provider", () => {
  let fx: ConvertedFixtures;
  let scratch: string;
  beforeAll(async () => {
    fx = await convertedFixtures();
    scratch = mkdtempSync(join(tmpdir(), "tessera-acc-level-"));
  }, 600_000);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("sets accuracy_level 4 on every MatMulNBits node, and the CPU session's logits stay within int4's tolerance of the unedited one", async () => {
    const original = readFileSync(join(fx.models.sdarInt4, "model.onnx"));
    const before = matMulNBitsAccuracyLevels(original);
    expect(before.length).toBeGreaterThan(4);
    expect(before.every((l) => l === undefined)).toBe(true);
    const leveled = withMatMulNBitsAccuracy(original, 4)!;
    expect(matMulNBitsAccuracyLevels(leveled)).toEqual(before.map(() => 4));
    expect(withMatMulNBitsAccuracy(leveled, 4)).toBeUndefined(); // nothing left to set
    expect(withMatMulNBitsAccuracy(leveled, 2)).toBeUndefined(); // a level the model has is kept...
    expect(matMulNBitsAccuracyLevels(withMatMulNBitsAccuracy(leveled, 2, true)!)).toEqual(before.map(() => 2)); // ...unless config.json names one

    const shape = { numLayers: 2, numKvHeads: 2, headDim: 24 };
    const [plain, int8Compute] = await Promise.all([logits(original, shape), logits(leveled, shape)]);
    const error = relativeRms(int8Compute, plain);
    expect(error).toBeGreaterThan(0); // the level reached the kernel: activations quantized to int8
    expect(error).toBeLessThan(0.35); // the contract's int4 tolerance (against fp32)
  }, 120_000);

  it("edits on the CPU provider only, as config.json allows", () => {
    expect(int4AccuracyLevel({})).toEqual({ level: 4, replace: false });
    expect(int4AccuracyLevel({}, ["cpu"])).toEqual({ level: 4, replace: false });
    expect(int4AccuracyLevel({ cpuInt4AccuracyLevel: 1 }, ["cpu"])).toEqual({ level: 1, replace: true });
    expect(int4AccuracyLevel({ cpuInt4AccuracyLevel: 0 }, ["cpu"])).toBeUndefined();
    expect(int4AccuracyLevel({}, ["webgpu"])).toBeUndefined();
    expect(int4AccuracyLevel({}, ["cuda"])).toBeUndefined();
  });

  it("loads the int4 model with its weights in model.onnx.data: the level set on the CPU, none for a GPU request, the data file left alone", async () => {
    const dir = join(scratch, "external");
    await runConvertPython([
      "-c",
      "import onnx, shutil, sys; src, dst = sys.argv[1], sys.argv[2]; shutil.copytree(src, dst, ignore=shutil.ignore_patterns('model.onnx')); " +
        "onnx.save_model(onnx.load(src + '/model.onnx'), dst + '/model.onnx', save_as_external_data=True, all_tensors_to_one_file=True, location='model.onnx.data', size_threshold=0)",
      fx.models.sdarInt4,
      dir,
    ]);
    expect(existsSync(join(dir, "model.onnx.data"))).toBe(true);
    const files = readdirSync(dir).sort();

    const cpu = await loadModelDir(dir, { worker: false, executionProviders: ["cpu"], intraOpThreads: 1 });
    try {
      expect(cpu.int4AccuracyLevel).toBe(4);
      expect(cpu.skippableHead).toBe(true); // the other edits still apply
    } finally {
      await cpu.close();
    }
    // A CUDA request (its libraries are not installed here) runs on the CPU as converted.
    const gpu = await loadModelDir(dir, { worker: false, executionProviders: ["cuda"], fallback: "cpu", intraOpThreads: 1 });
    try {
      expect(gpu.executionProviders).toEqual(["cpu"]);
      expect(gpu.int4AccuracyLevel).toBeUndefined();
    } finally {
      await gpu.close();
    }
    expect(readdirSync(dir).sort()).toEqual(files);
  }, 120_000);
});
