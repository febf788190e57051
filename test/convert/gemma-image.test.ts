// The engine's image preprocessing (sharp's decoding + image-preprocess.ts) against
// transformers' own Gemma 4 image processor (Gemma4ImageProcessorPil, transformers 5.18) on
// fixed PNG images: a larger one it shrinks, a smaller one it enlarges, one with alpha and a
// grey one. The pixel values and patch positions must be equal, not merely close: the
// resampling is Pillow's, ported bit for bit.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import { decodeImageDataUrl } from "../../services/inference/decoder/canvas/image-decode.js";
import { preprocessImage, type VisionSettings } from "../../services/inference/decoder/canvas/image-preprocess.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const SETTINGS: VisionSettings = { patchSize: 4, poolingKernelSize: 2, maxSoftTokens: 70 };

/** A deterministic picture: gradients and a hashed texture, so every resampling tap matters. */
async function picture(width: number, height: number, channels: 1 | 3 | 4): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * channels);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < channels; c++)
        raw[(y * width + x) * channels + c] = (x * 7 + y * 13 + c * 61 + ((x * y * 2654435761) >>> 27)) & 255;
    }
  }
  return await sharp(raw, { raw: { width, height, channels } }).png().toBuffer();
}

const REFERENCE = `
import json, sys, numpy as np
from PIL import Image
from transformers.models.gemma4 import Gemma4ImageProcessorPil
s = json.loads(sys.argv[1])
proc = Gemma4ImageProcessorPil(patch_size=s["patchSize"], pooling_kernel_size=s["poolingKernelSize"], max_soft_tokens=s["maxSoftTokens"])
for path in sys.argv[2:]:
    out = proc(images=Image.open(path), return_tensors="np")
    n = int(out["num_soft_tokens_per_image"][0]) * s["poolingKernelSize"] ** 2
    out["pixel_values"][0, :n].astype(np.float32).tofile(path + ".pixels")
    out["image_position_ids"][0, :n].astype(np.int32).tofile(path + ".positions")
    print(json.dumps({"tokens": int(out["num_soft_tokens_per_image"][0]), "patches": n}))
`;

describe.skipIf(!HAVE_CONVERT_VENV)("Gemma 4 image preprocessing equals transformers' processor", () => {
  const dir = mkdtempSync(join(tmpdir(), "gemma-image-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("pixel values, positions and tokens per image, bit for bit", async () => {
    const cases = [
      { name: "large", png: await picture(123, 77, 3) },
      { name: "small", png: await picture(19, 30, 3) },
      { name: "alpha", png: await picture(90, 64, 4) },
      { name: "grey", png: await picture(41, 100, 1) },
      // Widened and shrunk at once: the vertical pass reads the widened rows through its window.
      { name: "thin", png: await picture(3, 400, 3) },
    ];
    const paths = cases.map((c) => {
      const path = join(dir, `${c.name}.png`);
      writeFileSync(path, c.png);
      return path;
    });
    writeFileSync(join(dir, "reference.py"), REFERENCE);
    const { stdout } = await runConvertPython([join(dir, "reference.py"), JSON.stringify(SETTINGS), ...paths], 120_000);
    const expected = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { tokens: number; patches: number });
    for (const [i, c] of cases.entries()) {
      const url = `data:image/png;base64,${c.png.toString("base64")}`;
      const decoded = await decodeImageDataUrl(url, { maxBytes: 1 << 20, maxPixels: 1 << 20 });
      const got = preprocessImage(decoded.rgb, decoded.width, decoded.height, SETTINGS);
      expect(got.tokens, c.name).toBe(expected[i]!.tokens);
      expect(got.patches, c.name).toBe(expected[i]!.patches);
      const pixels = new Float32Array(Uint8Array.from(readFileSync(`${paths[i]}.pixels`)).buffer);
      const positions = new Int32Array(Uint8Array.from(readFileSync(`${paths[i]}.positions`)).buffer);
      expect(Array.from(got.positions), c.name).toEqual(Array.from(positions));
      let worst = 0;
      for (let j = 0; j < pixels.length; j++) worst = Math.max(worst, Math.abs(pixels[j]! - got.pixelValues[j]!));
      expect(got.pixelValues.length, c.name).toBe(pixels.length);
      expect(worst, c.name).toBe(0);
    }
  }, 180_000);
});
