// The converter at a size that shows what the tiny fixtures cannot: 118 M parameters in SDAR's
// published layout (Qwen's 151,936-row vocabulary, two shards, an index), converted fp32 with
// its weights in model.onnx.data, int8 and int4 (in model.onnx.data too), then held to the same parity with transformers as
// the tiny checkpoints. The 1.7B figures are bench/full_size/'s (README there).
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

interface Parity {
  fp32: Record<string, number>;
  int8: Record<string, number>;
  int4: Record<string, number>;
  block_causal: boolean;
}

/** The largest "[rss X GB, peak Y GB]" the converter printed (its PyTorch stage's or its own). */
function peakGb(stderr: string): number {
  const peaks = [...stderr.matchAll(/peak ([\d.]+) GB\]/g)].map((m) => Number(m[1]));
  return peaks.length > 0 ? Math.max(...peaks) : Number.NaN;
}

describe.skipIf(!HAVE_CONVERT_VENV)("tessera convert at 118 M parameters (SDAR layout, full vocabulary)", () => {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-convert-118m-"));
  const ckpt = join(scratch, "ckpt");
  const fp32 = join(scratch, "fp32");
  const int8 = join(scratch, "int8");
  const int4 = join(scratch, "int4");
  let fp32Log = "";
  let int8Count = 0;
  let int4Count = 0;

  beforeAll(async () => {
    await runConvertPython(["bench/full_size/make_checkpoints.py", "sdar-118m-ci", ckpt]);
    fp32Log = (await runConvertPython(["-m", "tessera_convert", ckpt, fp32, "--weights", "fp32", "--external-data", "always"])).stderr;
    // int8 from the fp32 file by the converter's own quantizer (`--weights int8` runs it after the
    // same PyTorch stage): one PyTorch stage instead of two keeps the test in seconds.
    const quantized = async (dir: string, code: string): Promise<number> => {
      await runConvertPython(["-c", `import shutil; shutil.copytree(${JSON.stringify(fp32)}, ${JSON.stringify(dir)})`]);
      rmSync(join(dir, "model.onnx"));
      rmSync(join(dir, "model.onnx.data"));
      const src = JSON.stringify(join(fp32, "model.onnx"));
      const dst = JSON.stringify(join(dir, "model.onnx"));
      return Number((await runConvertPython(["-c", code.replace("SRC", src).replace("DST", dst)])).stdout.trim());
    };
    int8Count = await quantized(int8, "from tessera_convert.export import to_int8; print(to_int8(SRC, DST, False))");
    int4Count = await quantized(
      int4,
      "from tessera_convert.quantize_int4 import to_int4_streamed; print(to_int4_streamed(SRC, DST, True))",
    );
  }, 600_000);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("fp32 in model.onnx + model.onnx.data, int8 and int4: parity with transformers (1e-3; relative RMS int8 < 0.1, int4 < 0.35), block-causal", async () => {
    const { stdout } = await runConvertPython(["convert/tests/parity.py", ckpt, fp32, "--int8-model-dir", int8, "--int4-model-dir", int4]);
    const r = JSON.parse(stdout) as Parity;
    for (const key of ["logits", "logits_past", "present", "present_past"]) expect(r.fp32[key]).toBeLessThan(1e-3);
    expect(r.block_causal).toBe(true);
    expect(r.int8.logits_rel_rms).toBeLessThan(0.1);
    expect(r.int8.logits_rel_rms).toBeGreaterThan(0);
    expect(r.int8.argmax_agreement).toBeGreaterThan(0.9);
    expect(r.int4.logits_rel_rms).toBeLessThan(0.35);
    expect(r.int4.logits_rel_rms).toBeGreaterThan(r.int8.logits_rel_rms!);
  }, 300_000);

  it("writes the weights once: the graph file is small, int8 much smaller, and the peak memory is about one fp32 copy", () => {
    const graph = statSync(join(fp32, "model.onnx")).size;
    const data = statSync(join(fp32, "model.onnx.data")).size;
    const params = JSON.parse(readFileSync(join(fp32, "config.json"), "utf8")).vocab_size as number;
    expect(params).toBe(151936);
    expect(graph).toBeLessThan(1e6);
    expect(data).toBeGreaterThan(450e6); // 118 M float32 weights
    // Every matmul (the head's 58 M weights included) in 1 byte; the embedding's Gather stays float32.
    expect(statSync(join(int8, "model.onnx")).size).toBeLessThan(data * 0.65);
    // Exporting the weights with the graph peaked at ~2.5 copies of the fp32 weights (17 GB at 1.7B);
    // the graph alone, then the weights one at a time: the module's copy plus the interpreter (~0.5 GB).
    expect(peakGb(fp32Log)).toBeLessThan((data / 1e9) * 1.25 + 0.9);
    expect(int8Count).toBe(2 * 7 + 1); // q, k, v, o, gate, up, down per layer, and the head
    expect(int4Count).toBe(int8Count);
    // The matmuls' ~60 M weights in 4 bits and a float32 scale per 32 (0.625 bytes, int8: 1),
    // in model.onnx.data; the embedding's 233 MB stay float32 in both (measured: 273 vs 295 MB).
    expect(statSync(join(int4, "model.onnx.data")).size).toBeLessThan(statSync(join(int8, "model.onnx")).size - 15e6);
  });
});
