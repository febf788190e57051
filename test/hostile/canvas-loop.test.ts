// Beside image chats of a canvas model the event loop stays free (issue 39): the canvas model's
// ONNX Runtime sessions (encoder, denoiser, vision, the sampler's graphs) run on worker threads
// on the CPU provider, so /healthz answers within 1 s while 4 chats of 7 images of 3,000² each
// are decoded, encoded and denoised. The tiny converted DiffusionGemma in a `tessera serve` of
// its own, on 127.0.0.1.
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeWhile, startTinyServe, type TinyServe } from "../helpers/hostile.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const CHATS = 4;
const IMAGES = 7;
const SIDE = 3000;

describe.skipIf(!HAVE_CONVERT_VENV)("a canvas model's image chats and the event loop", () => {
  let serve: TinyServe;
  let body: string;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    serve = await startTinyServe("canvas-loop", fx.model, { TESSERA_SLOTS: String(CHATS) });
    const raw = Buffer.alloc(SIDE * SIDE * 3);
    for (let i = 0; i < raw.length; i++) raw[i] = (i * 37) & 255;
    const png = await sharp(raw, { raw: { width: SIDE, height: SIDE, channels: 3 } })
      .png()
      .toBuffer();
    const url = `data:image/png;base64,${png.toString("base64")}`;
    body = JSON.stringify({
      model: "textmodel-26b",
      max_tokens: 32,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What are these?" },
            ...Array.from({ length: IMAGES }, () => ({ type: "image_url", image_url: { url } })),
          ],
        },
      ],
    });
  }, 300_000);
  afterAll(async () => {
    await serve?.close();
  });

  it(`/healthz answers within 1 s beside ${CHATS} chats of ${IMAGES} images of ${SIDE}²`, { timeout: 300_000 }, async () => {
    const chats = Promise.all(
      Array.from({ length: CHATS }, async () => {
        const res = await fetch(`${serve.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${serve.key}`, "content-type": "application/json" },
          body,
        });
        return { status: res.status, text: await res.text() };
      }),
    );
    const started = performance.now();
    const [health] = await probeWhile(serve.url, ["/healthz"], chats);
    const answers = await chats;
    console.log(
      `${CHATS} chats x ${IMAGES} images of ${SIDE}^2: ${Math.round(performance.now() - started)} ms; ` +
        `/healthz slowest ${health!.maxMs} ms over ${health!.tries} probes`,
    );
    for (const a of answers) expect(a.status, a.text.slice(0, 300)).toBe(200);
    expect(health!.failures).toBe(0);
    expect(health!.maxMs).toBeLessThanOrEqual(1_000);
  });
});
