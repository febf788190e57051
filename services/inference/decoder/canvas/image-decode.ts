/**
 * An `image_url` part's `data:` URL decoded to packed RGB bytes with sharp (libvips). PNG,
 * JPEG and WebP only; the bytes and pixels are bounded before any pixel is decoded (the probe,
 * on the event loop, reads the header only); the decoding runs on the image worker
 * (image-worker.ts), where the pixels stay. Alpha is dropped and grey is spread to three
 * channels, as Pillow's `convert("RGB")` (what Gemma 4's processor does) does.
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
    throw new ImageRefused(`an image is larger than ${limits.maxBytes} bytes (TESSERA_MAX_IMAGE_BYTES)`);
  }
  const bytes = Buffer.from(body, "base64");
  if (bytes.length > limits.maxBytes) throw new ImageRefused(`an image is larger than ${limits.maxBytes} bytes (TESSERA_MAX_IMAGE_BYTES)`);
  let format: string | undefined;
  let width = 0;
  let height = 0;
  try {
    // The header only: sharp's own pixel limit (268 Mpx) would hide TESSERA_MAX_IMAGE_PIXELS's answer.
    const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
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
    throw new ImageRefused(
      `an image of ${width}x${height} pixels is larger than the ${limits.maxPixels} pixels allowed (TESSERA_MAX_IMAGE_PIXELS)`,
    );
  }
  return { bytes, width, height };
}

/** An image's bytes (probed: probeImageDataUrl) decoded to packed RGB; the pixels are sharp's own buffer, not copied. */
export async function decodeImage(bytes: Uint8Array, limits: ImageLimits): Promise<DecodedImage> {
  try {
    const { data, info } = await sharp(bytes, { limitInputPixels: limits.maxPixels, pages: 1 })
      .removeAlpha()
      .toColourspace("srgb")
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`${info.channels} channels`);
    return { rgb: data, width: info.width, height: info.height };
  } catch (err) {
    throw new ImageRefused(`an image could not be decoded: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export async function decodeImageDataUrl(url: string, limits: ImageLimits): Promise<DecodedImage> {
  return decodeImage((await probeImageDataUrl(url, limits)).bytes, limits);
}
