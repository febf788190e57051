// Hostile images (issue 39, item 3), through the tiny converted DiffusionGemma (vision.onnx):
// an image its vision tower cannot place (a long thin one: more patches along a side than its
// position table has) is a 400 naming position_embedding_size, not a 500; one over sharp's own
// 268 Mpx a 400 naming TESSERA_MAX_IMAGE_PIXELS; and large images are decoded and resized on
// the image worker.
import { crc32, deflateSync } from "node:zlib";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

async function dataUrl(width: number, height: number, format: "png" | "webp" = "png"): Promise<string> {
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 37) & 255;
  const image = sharp(raw, { raw: { width, height, channels: 3 } });
  const bytes = await (format === "webp" ? image.webp() : image.png()).toBuffer();
  return `data:image/${format};base64,${bytes.toString("base64")}`;
}

/** A PNG that says it is width × height pixels: a header and a few bytes of data, nothing to decode. */
function pngHeaderOnly(width: number, height: number): string {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const frame = Buffer.alloc(8 + data.length + 4);
    frame.writeUInt32BE(data.length, 0);
    body.copy(frame, 4);
    frame.writeUInt32BE(crc32(body) >>> 0, 8 + data.length);
    return frame;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const signature = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  const png = Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.alloc(64))), chunk("IEND", Buffer.alloc(0))]);
  return `data:image/png;base64,${png.toString("base64")}`;
}

const chatWith = (...urls: string[]) =>
  JSON.stringify({
    model: "textmodel-26b",
    max_tokens: 4,
    messages: [
      {
        role: "user",
        content: [{ type: "text", text: "What is this?" }, ...urls.map((url) => ({ type: "image_url", image_url: { url } }))],
      },
    ],
  });

describe.skipIf(!HAVE_CONVERT_VENV)("hostile images", () => {
  let tessera: TestTessera;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    tessera = await startTestTessera({ modelDir: fx.model, env: { TESSERA_LOG_LEVEL: "warn" } });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  async function chat(body: string) {
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return { status: res.status, body: (await res.json()) as { error?: { message: string; type: string } } };
  }

  it("a long thin image is a 400 naming the vision tower's position table, not a 500", async () => {
    // Tiny model: patch 4, 64 positions a side. 1 x 200,000 -> 8 x 2240 px: 560 patches down;
    // 2,000 x 16 -> 1496 x 8 px: 374 across.
    for (const url of [await dataUrl(1, 200_000), await dataUrl(2000, 16, "webp")]) {
      const answer = await chat(chatWith(url));
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body.error?.message).toMatch(/places at most 64 patches along a side \(position_embedding_size/);
    }
  }, 60_000);

  it("an image over sharp's own 268 Mpx is a 400 naming TESSERA_MAX_IMAGE_PIXELS", async () => {
    const answer = await chat(chatWith(pngHeaderOnly(20_000, 20_000)));
    expect(answer.status, JSON.stringify(answer.body)).toBe(400);
    expect(answer.body.error?.message).toMatch(
      /20000x20000 pixels is larger than the 33554432 pixels allowed \(TESSERA_MAX_IMAGE_PIXELS\)/,
    );
  });

  it("large images are decoded and resized on the image worker: answered, no 5xx", { timeout: 120_000 }, async () => {
    const url = await dataUrl(2048, 2048);
    const answers = [await chat(chatWith(url, url))];
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });
});
