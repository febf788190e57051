// An image prompt through the engine's own image path (sharp decoding, image-preprocess.ts on
// its worker thread, vision.onnx, the image-token run and the image mask rule of the encoder
// pass) against transformers end to end: Gemma4ImageProcessorPil on the same PNG, then
// DiffusionGemma's encoder with the masks `generate` builds. The KV caches must agree within 1e-3.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import { CanvasImages, DEFAULT_IMAGE_LIMITS } from "../../services/inference/canvas/canvas-images.js";
import { CanvasDecoder } from "../../services/inference/decoder/canvas/canvas-decoder.js";
import { loadCanvasModel } from "../../services/inference/decoder/canvas/canvas-model.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const REFERENCE = `
import json, sys, numpy as np, torch
from PIL import Image
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache
from transformers.models.gemma4 import Gemma4ImageProcessorPil
ckpt, png, out, ids = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
model = DiffusionGemmaForBlockDiffusion.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
cfg = model.config
vc = cfg.vision_config
proc = Gemma4ImageProcessorPil(patch_size=vc.patch_size, pooling_kernel_size=vc.pooling_kernel_size, max_soft_tokens=280)
pix = proc(images=Image.open(png), return_tensors="pt")
n = int(pix["num_soft_tokens_per_image"][0])
at = ids.index(cfg.image_token_id)
full = ids[:at] + [cfg.boi_token_id] + [cfg.image_token_id] * n + [cfg.eoi_token_id] + ids[at + 1:]
x = torch.tensor([full])
pos = torch.arange(x.shape[1])[None]
cache = DynamicCache(config=cfg.text_config)
enc = model.model.encoder
with torch.no_grad():
    masks = enc.create_masks_for_generate(config=cfg, inputs_embeds=torch.empty(1, x.shape[1], 0),
                                          attention_mask=torch.ones(1, x.shape[1], dtype=torch.bool), past_key_values=cache,
                                          position_ids=pos, mm_token_type_ids=(x == cfg.image_token_id).long())
    enc(input_ids=x, pixel_values=pix["pixel_values"], image_position_ids=pix["image_position_ids"], attention_mask=masks,
        past_key_values=cache, position_ids=pos)
shapes = []
for l, layer in enumerate(cache.layers):
    layer.keys.numpy().astype(np.float32).tofile(f"{out}/k{l}")
    layer.values.numpy().astype(np.float32).tofile(f"{out}/v{l}")
    shapes.append(list(layer.keys.shape))
print(json.dumps({"ids": full, "shapes": shapes}))
`;

describe.skipIf(!HAVE_CONVERT_VENV)("an image prompt's KV through the engine's image path equals transformers'", () => {
  const dir = mkdtempSync(join(tmpdir(), "dg-image-kv-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("fp32 tiny model: every layer's keys and values within 1e-3", async () => {
    const fx = await diffusionGemmaFixture();
    const raw = Buffer.alloc(40 * 28 * 3);
    for (let i = 0; i < raw.length; i++) raw[i] = (i * 29 + ((i * 2654435761) >>> 26)) & 255;
    const png = await sharp(raw, { raw: { width: 40, height: 28, channels: 3 } })
      .png()
      .toBuffer();
    writeFileSync(join(dir, "image.png"), png);
    writeFileSync(join(dir, "reference.py"), REFERENCE);
    const model = await loadCanvasModel(fx.model, { intraOpThreads: 1 });
    const images = new CanvasImages({ ...model, vision: model.vision! }, model.config.vision!, DEFAULT_IMAGE_LIMITS);
    try {
      const v = model.config.vision!;
      const ids = [2, 40, 41, v.imageTokenId, 42, 43, 44];
      const { stdout } = await runConvertPython(
        [join(dir, "reference.py"), fx.checkpoint, join(dir, "image.png"), dir, JSON.stringify(ids)],
        240_000,
      );
      const ref = JSON.parse(stdout.trim().split("\n").at(-1)!) as { ids: number[]; shapes: number[][] };
      const prompt = await images.expand(ids, [`data:image/png;base64,${png.toString("base64")}`]);
      expect(prompt.ids).toEqual(ref.ids);
      const cache = await new CanvasDecoder(model).encodePrompt(prompt.ids, await images.embed(prompt));
      let worst = 0;
      model.config.layers.forEach((layer, l) => {
        const [, kv, T, d] = ref.shapes[l]!;
        const held = cache.layers[l]!.length;
        const keep = Math.min(held, T!);
        for (const [j, name] of (["k", "v"] as const).entries()) {
          const want = new Float32Array(Uint8Array.from(readFileSync(join(dir, `${name}${l}`))).buffer);
          const got = cache.layers[l]!.data[j]!;
          for (let h = 0; h < kv!; h++) {
            for (let t = 0; t < keep; t++) {
              for (let e = 0; e < d!; e++) {
                const a = want[(h * T! + T! - keep + t) * d! + e]!;
                const b = got[(h * held + held - keep + t) * d! + e]!;
                worst = Math.max(worst, Math.abs(a - b) / (1 + Math.abs(a)));
              }
            }
          }
        }
        expect(layer.kvHeads).toBe(kv);
      });
      expect(worst).toBeLessThan(1e-3);
      console.log(`image prompt KV through the engine's image path: worst relative difference ${worst.toExponential(2)}`);
    } finally {
      await images.close();
      await model.close();
    }
  }, 300_000);
});
