// The converter at a size that shows what the tiny fixtures cannot: 160 M parameters in SDAR's
// published layout (Qwen's 151,936-row vocabulary, two shards, an index), converted fp32 with
// its weights in model.onnx.data and int8, then held to the same parity with transformers as
// the tiny checkpoints. The 1.7B figures are bench/full_size/'s (README there).
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "./converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

interface Parity {
  fp32: Record<string, number>;
  int8: Record<string, number>;
  block_causal: boolean;
}

/** The last "[rss X GB, peak Y GB]" the converter printed: its peak resident memory. */
function peakGb(stderr: string): number {
  const peaks = [...stderr.matchAll(/peak ([\d.]+) GB\]/g)].map((m) => Number(m[1]));
  return peaks.at(-1) ?? Number.NaN;
}

describe.skipIf(!HAVE_CONVERT_VENV)("tessera convert at 160 M parameters (SDAR layout, full vocabulary)", () => {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-convert-160m-"));
  const ckpt = join(scratch, "ckpt");
  const fp32 = join(scratch, "fp32");
  const int8 = join(scratch, "int8");
  let fp32Log = "";
  let int8Log = "";

  beforeAll(async () => {
    await runConvertPython(["bench/full_size/make_checkpoints.py", "sdar-160m-ci", ckpt]);
    fp32Log = (await runConvertPython(["-m", "tessera_convert", ckpt, fp32, "--external-data", "always"])).stderr;
    int8Log = (await runConvertPython(["-m", "tessera_convert", ckpt, int8, "--weights", "int8"])).stderr;
  }, 600_000);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("fp32 in model.onnx + model.onnx.data and int8: parity with transformers (1e-3; int8 relative RMS < 0.1), block-causal", async () => {
    const { stdout } = await runConvertPython(["convert/tests/parity.py", ckpt, fp32, "--int8-model-dir", int8]);
    const r = JSON.parse(stdout) as Parity;
    for (const key of ["logits", "logits_past", "present", "present_past"]) expect(r.fp32[key]).toBeLessThan(1e-3);
    expect(r.block_causal).toBe(true);
    expect(r.int8.logits_rel_rms).toBeLessThan(0.1);
    expect(r.int8.logits_rel_rms).toBeGreaterThan(0);
    expect(r.int8.argmax_agreement).toBeGreaterThan(0.9);
  }, 300_000);

  it("writes the weights once: the graph file is small, int8 is under a third of fp32, and the peak memory is about one fp32 copy", () => {
    const graph = statSync(join(fp32, "model.onnx")).size;
    const data = statSync(join(fp32, "model.onnx.data")).size;
    const params = JSON.parse(readFileSync(join(fp32, "config.json"), "utf8")).vocab_size as number;
    expect(params).toBe(151936);
    expect(graph).toBeLessThan(1e6);
    expect(data).toBeGreaterThan(600e6); // 160 M float32 weights
    expect(statSync(join(int8, "model.onnx")).size).toBeLessThan(data / 3 + 1e6);
    // Exporting the weights with the graph peaked at ~2.5 copies of the fp32 weights (17 GB at 1.7B);
    // the graph alone, then the weights one at a time: the module's copy plus the interpreter (~0.5 GB).
    expect(peakGb(fp32Log)).toBeLessThan((data / 1e9) * 1.25 + 0.9);
    expect(int8Log).toMatch(/int8: quantizing/);
  });
});
