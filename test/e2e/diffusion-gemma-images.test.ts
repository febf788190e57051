// DiffusionGemma with images end to end: `image_url` data: URLs through the official openai
// client, real HTTP, the tiny converted model (vision.onnx + encoder.onnx): a chat and a
// stream with images, their image tokens counted in usage.prompt_tokens, and bad images
// (not an image, an unsupported format, too many pixels or images) refused with a 400 in the
// OpenAI error shape.
import OpenAI from "openai";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const MODEL = "textmodel-26b";

async function png(width: number, height: number, format: "png" | "jpeg" | "webp" | "gif" = "png"): Promise<string> {
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 37) & 255;
  const image = sharp(raw, { raw: { width, height, channels: 3 } });
  const bytes = await (format === "gif"
    ? image.gif()
    : format === "jpeg"
      ? image.jpeg()
      : format === "webp"
        ? image.webp()
        : image.png()
  ).toBuffer();
  return `data:image/${format};base64,${bytes.toString("base64")}`;
}

const withImages = (...urls: string[]) => ({
  model: MODEL,
  max_tokens: 16,
  messages: [
    {
      role: "user" as const,
      content: [
        { type: "text" as const, text: "What is in these?" },
        ...urls.map((url) => ({ type: "image_url" as const, image_url: { url } })),
      ],
    },
  ],
});

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma (canvas model) with images through the openai client", () => {
  let tessera: TestTessera;
  let client: OpenAI;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    tessera = await startTestTessera({ modelDir: fx.model, env: { TESSERA_MAX_IMAGES: "2", TESSERA_MAX_IMAGE_PIXELS: "40000" } });
    client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  it("chat with an image: a reply, and the image's tokens in prompt_tokens", async () => {
    const text = await client.chat.completions.create({ ...withImages(), messages: [{ role: "user", content: "What is in these?" }] });
    // Tiny model: patch 4, pooling 2, at most 280 image tokens (1120 patches, 17,920 px): Gemma 4's
    // processor resizes every image to that budget, up or down, in whole 8-px windows.
    // 64x48 -> 152x112 -> 38 x 28 patches -> 266 tokens, plus boi and eoi, plus the "\n" joining the parts.
    const one = await client.chat.completions.create(withImages(await png(64, 48)));
    expect(typeof one.choices[0]!.message.content).toBe("string");
    expect(one.usage!.completion_tokens).toBeGreaterThan(0);
    expect(one.usage!.prompt_tokens - text.usage!.prompt_tokens).toBe(266 + 2 + 1);
    // 100x100 -> 128x128 -> 32 x 32 patches -> 256 tokens.
    const two = await client.chat.completions.create(withImages(await png(64, 48, "jpeg"), await png(100, 100, "webp")));
    expect(two.usage!.prompt_tokens - text.usage!.prompt_tokens).toBe(266 + 2 + 1 + 256 + 2 + 1);
  }, 120_000);

  it("the quota counts image tokens (CountTokens expands the image run before admission)", async () => {
    const key = await tessera.createKey({ textQuota: 120 });
    const small = new OpenAI({ apiKey: key.apiKey, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
    const text = await small.chat.completions.create({ ...withImages(), messages: [{ role: "user", content: "Hi" }] });
    expect(text.usage!.prompt_tokens).toBeLessThan(40);
    const err = await small.chat.completions.create(withImages(await png(64, 48))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).type).toBe("insufficient_quota");
  }, 120_000);

  it("stream with an image", async () => {
    const stream = await client.chat.completions.create({
      ...withImages(await png(32, 32)),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toMatch(/stop|length/);
    expect(chunks.find((c) => c.usage)?.usage?.prompt_tokens).toBeGreaterThan(16);
  }, 120_000);

  it("bad images get a 400 in the OpenAI error shape", async () => {
    const refused = async (params: ReturnType<typeof withImages>) => {
      try {
        await client.chat.completions.create(params);
      } catch (err) {
        expect(err).toBeInstanceOf(OpenAI.BadRequestError);
        expect((err as InstanceType<typeof OpenAI.BadRequestError>).type).toBe("invalid_request_error");
        return (err as InstanceType<typeof OpenAI.BadRequestError>).message;
      }
      throw new Error("not refused");
    };
    expect(await refused(withImages(`data:image/png;base64,${Buffer.from("not an image at all").toString("base64")}`))).toMatch(
      /not a PNG, JPEG or WebP image/,
    );
    expect(await refused(withImages(await png(8, 8, "gif")))).toMatch(/gif format is not supported/);
    expect(await refused(withImages(await png(300, 200)))).toMatch(/300x200 pixels is larger than the 40000 pixels allowed/);
    const small = await png(8, 8);
    expect(await refused(withImages(small, small, small))).toMatch(/at most 2 images per request/);
    expect(await refused(withImages("https://example.com/cat.png"))).toMatch(/data: URL/);
    // Text that spells the image token is text (user text never yields a control token), so it
    // neither opens an image run without an image nor gets the request refused.
    const spoof = withImages(small);
    spoof.messages[0]!.content.unshift({ type: "text", text: "look: <|image|>" } as never);
    const answered = await client.chat.completions.create(spoof);
    expect(answered.choices[0]?.message.role).toBe("assistant");
    expect(answered.usage?.prompt_tokens).toBeGreaterThan(0);
  }, 120_000);
});
