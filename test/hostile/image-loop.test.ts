// Large images never hold the event loop (issue 39, item 3): a 5,792 × 5,792 PNG of about 110 KB
// (under the 33.5 Mpx cap) is 100 MB of pixels. Before, sharp decoded it beside the loop and the
// pixels were copied on it to be handed to the preprocessing thread: 7 at once held the loop up to
// 2.6–3.5 s and grew RSS by 657–815 MiB. Now the image worker decodes and preprocesses them, one
// at a time: the loop stays free, and at most one image's pixels are held.
import { monitorEventLoopDelay } from "node:perf_hooks";
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import { ImagePreprocessor } from "../../services/inference/decoder/canvas/image-preprocessor.js";

const SIDE = 5792;
const preprocessor = new ImagePreprocessor();
afterAll(() => preprocessor.close());

async function stripes(side: number): Promise<Buffer> {
  const raw = Buffer.alloc(side * side * 3);
  for (let y = 0; y < side; y++) raw.fill((y * 7) & 255, y * side * 3, (y + 1) * side * 3);
  return await sharp(raw, { raw: { width: side, height: side, channels: 3 } })
    .png()
    .toBuffer();
}

describe("three 5,792² images at once", () => {
  it("are decoded and preprocessed off the event loop, with bounded memory", { timeout: 120_000 }, async () => {
    const png = await stripes(SIDE);
    const delay = monitorEventLoopDelay({ resolution: 10 });
    const rss = process.memoryUsage().rss;
    let peak = rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    delay.enable();
    const settings = { patchSize: 16, poolingKernelSize: 3, maxSoftTokens: 280 };
    const out = await Promise.all(
      [0, 1, 2].map(() => preprocessor.run(png, { maxBytes: 10 << 20, maxPixels: 32 * 1024 * 1024 }, settings)),
    );
    delay.disable();
    clearInterval(sampler);
    for (const image of out) expect(image.tokens).toBeLessThanOrEqual(280);
    expect(delay.max / 1e6).toBeLessThanOrEqual(1000);
    expect((peak - rss) / 2 ** 20).toBeLessThan(600);
  });
});
