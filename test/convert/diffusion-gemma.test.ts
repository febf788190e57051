import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, tesseraConvert } from "../helpers/converted-models.js";
import { type DiffusionGemmaFixture, diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

describe.skipIf(!HAVE_CONVERT_VENV)("tessera convert: DiffusionGemma (contract v3)", () => {
  let fx: DiffusionGemmaFixture;
  beforeAll(async () => {
    fx = await diffusionGemmaFixture();
  }, 300_000);

  it("fp32: encoder KV, denoiser logits, self-conditioning, image embeddings and an image prompt's KV equal transformers' within 1e-3 (the summary's check)", () => {
    const { check } = fx.summary;
    expect(Object.keys(check).sort()).toEqual(["encoder_kv", "image_prompt_kv", "logits", "self_conditioning", "vision"]);
    for (const v of Object.values(check)) {
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThan(1e-3);
    }
    expect(fx.summary.family).toBe("diffusion_gemma");
  });

  it("writes two graphs over one shared weights file, and the checkpoint's tokenizer, template and sampler settings", () => {
    const files = readdirSync(fx.model).sort();
    expect(files).toEqual([
      "config.json",
      "decision.json",
      "denoiser.onnx",
      "encoder.onnx",
      "tokenizer.json",
      "tokenizer_config.json",
      "vision.onnx",
      "weights.onnx.data",
    ]);
    const config = JSON.parse(readFileSync(join(fx.model, "config.json"), "utf8"));
    expect(config.contract_version).toBe(3);
    expect(config.decoding_family).toBe("canvas");
    expect(config.canvas_length).toBe(16);
    expect(config.sliding_window).toBe(8);
    // The vision tower as its own graph; the engine places its rows at the image tokens.
    expect(config.vision_file).toBe("vision.onnx");
    expect(config.vision).toEqual({ patch_size: 4, pooling_kernel_size: 2, position_embedding_size: 64 });
    expect(config.capabilities.images).toBe(true);
    expect(config.layers.map((l: { type: string }) => l.type)).toEqual([
      "sliding_attention",
      "full_attention",
      "sliding_attention",
      "full_attention",
    ]);
    // Full layers: Gemma 4's larger head and one shared k=v head.
    expect(config.layers[1]).toEqual({ type: "full_attention", num_key_value_heads: 1, head_dim: 32 });
    const gen = JSON.parse(readFileSync(join(fx.checkpoint, "generation_config.json"), "utf8"));
    expect(config.sampler).toEqual({
      max_denoising_steps: gen.max_denoising_steps,
      entropy_bound: gen.sampler_config.entropy_bound,
      t_min: gen.t_min,
      t_max: gen.t_max,
      stability_threshold: gen.stability_threshold,
      confidence_threshold: gen.confidence_threshold,
    });
    const tokenizer = JSON.parse(readFileSync(join(fx.model, "tokenizer.json"), "utf8"));
    const endOfTurn = tokenizer.added_tokens.find((t: { content: string }) => t.content === "<turn|>").id;
    const toolResponse = tokenizer.added_tokens.find((t: { content: string }) => t.content === "<|tool_response>").id;
    // The end of turn, generation_config's <eos>, and Gemma 4's <|tool_response> (a reply that called a tool waits there).
    expect(config.stop_token_ids).toEqual([endOfTurn, 1, toolResponse]);
    expect(config.eos_token_id).toBe(endOfTurn);
    const tc = JSON.parse(readFileSync(join(fx.model, "tokenizer_config.json"), "utf8"));
    const source = JSON.parse(readFileSync(join(fx.checkpoint, "tokenizer_config.json"), "utf8"));
    expect(tc.chat_template).toBe(source.chat_template);
    // Shared weights: the layers and the embedding are in both graphs and stored once.
    const data = readFileSync(join(fx.model, "weights.onnx.data")).length;
    expect(data).toBe(fx.summary.weights_bytes);
    expect(data).toBeLessThan(0.7 * fx.summary.weights_bytes_unshared); // 0.6 on the tiny model; 1.0 unshared
  });

  it("int4 through the existing quantization path: MatMulNBits weights, smaller, its check printed (not held to 1e-3)", () => {
    const scratch = mkdtempSync(join(tmpdir(), "tessera-dg-"));
    const out = join(scratch, "model-int4");
    try {
      const r = tesseraConvert([fx.checkpoint, out, "--weights", "int4"]);
      expect(r.status, r.stderr).toBe(0);
      const summary = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
      expect(summary.weights).toBe("int4");
      expect(summary.check.logits).toBeGreaterThan(0);
      expect(summary.onnx_bytes).toBeLessThan(fx.summary.onnx_bytes * 0.6);
      expect(readFileSync(join(out, "denoiser.onnx")).includes("MatMulNBits")).toBe(true);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 300_000);
});
