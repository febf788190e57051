// DiffusionGemma's experts computed sparsely (convert/tessera_convert/gemma_graphs.py,
// SparseExperts: each token's top k experts only) against the dense formulation (every expert,
// weighted by the router): the tiny checkpoint converted with --experts sparse passes the
// converter's check against transformers, and its denoiser equals the dense conversion's on
// the same feeds, on a whole canvas and on a one-position canvas (where experts no token chose
// multiply an empty run of rows).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, tesseraConvert } from "../helpers/converted-models.js";
import { type DiffusionGemmaFixture, diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

interface Layer {
  num_key_value_heads: number;
  head_dim: number;
}

/** Deterministic values in [-1, 1). */
function values(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  });
}

function feeds(config: { hidden_size: number; vocab_size: number; layers: Layer[] }, canvas: number, past: number) {
  const H = config.hidden_size;
  const f: Record<string, ort.Tensor> = {
    canvas_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: canvas }, (_, i) => BigInt((i * 37 + 11) % config.vocab_size)),
      [1, canvas],
    ),
    position_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: canvas }, (_, i) => BigInt(past + i)),
      [1, canvas],
    ),
    self_conditioning_embeds: new ort.Tensor("float32", values(canvas * H, 1), [1, canvas, H]),
    temperature: new ort.Tensor("float32", Float32Array.of(0.7), [1]),
    full_attention_mask: new ort.Tensor("float32", new Float32Array(canvas * (past + canvas)), [1, 1, canvas, past + canvas]),
    sliding_attention_mask: new ort.Tensor("float32", new Float32Array(canvas * (past + canvas)), [1, 1, canvas, past + canvas]),
    logits_positions: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: canvas }, (_, i) => BigInt(i)),
      [1, canvas],
    ),
  };
  config.layers.forEach((l, i) => {
    for (const [j, kv] of ["key", "value"].entries()) {
      const n = l.num_key_value_heads * past * l.head_dim;
      f[`past_key_values.${i}.${kv}`] = new ort.Tensor("float32", values(n, 100 + 2 * i + j), [1, l.num_key_value_heads, past, l.head_dim]);
    }
  });
  return f;
}

function worstRelative(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / (1 + Math.abs(a[i]!)));
  return worst;
}

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma experts: sparse against dense and transformers", () => {
  let fx: DiffusionGemmaFixture;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-dg-experts-"));
  const sparse = join(scratch, "model-sparse");
  let summary: { experts: string; check: Record<string, number> };
  beforeAll(async () => {
    fx = await diffusionGemmaFixture();
    const r = tesseraConvert([fx.checkpoint, sparse, "--weights", "fp32", "--experts", "sparse"]);
    expect(r.status, r.stderr).toBe(0);
    summary = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
  }, 300_000);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("auto keeps the tiny model's 4 experts top 2 dense; --experts sparse passes the check against transformers within 1e-3", () => {
    expect(fx.summary.experts).toBe("dense");
    expect(summary.experts).toBe("sparse");
    expect(Object.keys(summary.check).sort()).toEqual(["encoder_kv", "image_prompt_kv", "logits", "self_conditioning", "vision"]);
    for (const v of Object.values(summary.check)) expect(v).toBeLessThan(1e-3);
    const config = JSON.parse(readFileSync(join(sparse, "config.json"), "utf8"));
    expect(config.source.experts).toBe("sparse");
  });

  it("the sparse denoiser equals the dense one within 1e-4 (the check against transformers: 4e-5 for both): a whole canvas, and one position (experts no token chose)", async () => {
    const config = JSON.parse(readFileSync(join(fx.model, "config.json"), "utf8"));
    const options = { executionProviders: ["cpu"], intraOpNumThreads: 1 };
    const dense = await ort.InferenceSession.create(join(fx.model, "denoiser.onnx"), options);
    const sparseSession = await ort.InferenceSession.create(join(sparse, "denoiser.onnx"), options);
    try {
      for (const canvas of [config.canvas_length, 1]) {
        const f = feeds(config, canvas, 5);
        const [a, b] = await Promise.all([dense.run(f), sparseSession.run(f)]);
        expect(a.logits!.dims).toEqual([1, canvas, config.vocab_size]);
        expect(worstRelative(a.logits!.data as Float32Array, b.logits!.data as Float32Array)).toBeLessThan(1e-4);
        const sc = (o: ort.InferenceSession.OnnxValueMapType) => o.next_self_conditioning_embeds!.data as Float32Array;
        expect(worstRelative(sc(a), sc(b))).toBeLessThan(1e-4);
      }
    } finally {
      await dense.release();
      await sparseSession.release();
    }
  });
});
