/**
 * An `image_url` part's `data:` URL decoded to packed RGB bytes with sharp (libvips; the
 * decoding runs on libuv's thread pool, not the event loop). PNG, JPEG and WebP only; the
 * bytes and pixels are bounded before any pixel is decoded. Alpha is dropped and grey is
 * spread to three channels, as Pillow's `convert("RGB")` (what Gemma 4's processor does) does.
 */
import sharp from "sharp";

export interface ImageLimits {
  /** Most bytes of one image (after base64). */
  maxBytes: number;
  /** Most pixels (width × height) of one image. */
  maxPixels: number;
}

/** An image the request must not carry: the message is the client's 400. */
export class ImageRefused extends Error {}

export interface DecodedImage {
  rgb: Uint8Array;
  width: number;
  height: number;
}

const FORMATS = new Set(["png", "jpeg", "webp"]);

/** The image's bytes and size, every limit checked, no pixel decoded yet. */
export async function probeImageDataUrl(url: string, limits: ImageLimits): Promise<{ bytes: Buffer; width: number; height: number }> {
  const comma = url.indexOf(",");
  const header = comma < 0 ? "" : url.slice(5, comma).toLowerCase();
  if (!url.startsWith("data:") || comma < 0 || !header.split(";").includes("base64")) {
    throw new ImageRefused("an image must be a base64 data: URL (data:image/png;base64,...)");
  }
  const body = url.slice(comma + 1);
  if (Math.floor((body.length * 3) / 4) > limits.maxBytes + 2) {
    throw new ImageRefused(`an image is larger than ${limits.maxBytes} bytes`);
  }
  const bytes = Buffer.from(body, "base64");
  if (bytes.length > limits.maxBytes) throw new ImageRefused(`an image is larger than ${limits.maxBytes} bytes`);
  let format: string | undefined;
  let width = 0;
  let height = 0;
  try {
    const meta = await sharp(bytes).metadata();
    format = meta.format;
    width = meta.width ?? 0;
    height = meta.height ?? 0;
  } catch {
    throw new ImageRefused("an image_url is not a PNG, JPEG or WebP image");
  }
  if (format === undefined || !FORMATS.has(format)) {
    throw new ImageRefused(`an image in ${format ?? "an unknown"} format is not supported: PNG, JPEG and WebP are`);
  }
  if (width < 1 || height < 1) throw new ImageRefused("an image has no pixels");
  if (width * height > limits.maxPixels) {
    throw new ImageRefused(`an image of ${width}x${height} pixels is larger than the ${limits.maxPixels} pixels allowed`);
  }
  return { bytes, width, height };
}

export async function decodeImageDataUrl(url: string, limits: ImageLimits): Promise<DecodedImage> {
  const { bytes } = await probeImageDataUrl(url, limits);
  try {
    const { data, info } = await sharp(bytes, { limitInputPixels: limits.maxPixels, pages: 1 })
      .removeAlpha()
      .toColourspace("srgb")
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`${info.channels} channels`);
    // A copy of its own, so that it can be transferred to the preprocessing thread.
    return { rgb: new Uint8Array(data), width: info.width, height: info.height };
  } catch (err) {
    throw new ImageRefused(`an image could not be decoded: ${err instanceof Error ? err.message : String(err)}`);
  }
}
