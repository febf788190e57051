/**
 * Gemma 4's image preprocessing (transformers 5.18, `Gemma4ImageProcessorPil`) on decoded RGB
 * bytes: the aspect-preserving size within the patch budget, Pillow's bicubic resampling
 * (ported bit for bit: its coefficients, 22-bit fixed point and rounding, horizontal pass then
 * vertical), rescale by 1/255 (no normalisation), then row-major patches of `patch_size`² × 3
 * with their (x, y) positions. Pure and synchronous: callers run it on a worker thread.
 */

export interface VisionSettings {
  patchSize: number;
  poolingKernelSize: number;
  /** Image tokens at most per image (the processor's `max_soft_tokens`). */
  maxSoftTokens: number;
}

export interface PreprocessedImage {
  /** `[patches, 3 * patch_size²]` float32, values in [0, 1]. */
  pixelValues: Float32Array;
  /** `[patches, 2]`: each patch's (x, y). */
  positions: Int32Array;
  patches: number;
  /** Image tokens (vision.onnx rows): patches / pooling_kernel_size². */
  tokens: number;
  width: number;
  height: number;
}

/** `get_aspect_ratio_preserving_size`: the largest size of whole pooling windows within the budget. */
export function targetSize(height: number, width: number, s: VisionSettings): { height: number; width: number } {
  const { patchSize: p, poolingKernelSize: k } = s;
  const maxPatches = s.maxSoftTokens * k * k;
  const targetPx = maxPatches * p * p;
  const factor = Math.sqrt(targetPx / (height * width));
  const side = k * p;
  let th = Math.floor((factor * height) / side) * side;
  let tw = Math.floor((factor * width) / side) * side;
  if (th === 0 && tw === 0) throw new RangeError(`a ${width}x${height} image cannot be resized to whole ${side}-pixel windows`);
  const maxSide = Math.floor(maxPatches / (k * k)) * side;
  if (th === 0) {
    th = side;
    tw = Math.min(Math.floor(width / height) * side, maxSide);
  } else if (tw === 0) {
    tw = side;
    th = Math.min(Math.floor(height / width) * side, maxSide);
  }
  if (th * tw > targetPx) throw new RangeError(`a ${width}x${height} image exceeds ${maxPatches} patches once resized`);
  return { height: th, width: tw };
}

const PRECISION_BITS = 32 - 8 - 2;

function bicubic(x: number): number {
  const a = -0.5;
  const t = Math.abs(x);
  if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return (((t - 5) * t + 8) * t - 4) * a;
  return 0;
}

/** Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for one axis. */
function coefficients(inSize: number, outSize: number): { bounds: Int32Array; kk: Int32Array; ksize: number } {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = 2 * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const kk = new Int32Array(outSize * ksize);
  const pre = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    const xmin = Math.max(0, Math.trunc(center - support + 0.5));
    const xmax = Math.min(inSize, Math.trunc(center + support + 0.5)) - xmin;
    let ww = 0;
    pre.fill(0);
    for (let x = 0; x < xmax; x++) {
      const w = bicubic((x + xmin - center + 0.5) * ss);
      pre[x] = w;
      ww += w;
    }
    for (let x = 0; x < xmax; x++) {
      const w = ww !== 0 ? pre[x]! / ww : pre[x]!;
      kk[xx * ksize + x] = Math.trunc(w < 0 ? -0.5 + w * (1 << PRECISION_BITS) : 0.5 + w * (1 << PRECISION_BITS));
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { bounds, kk, ksize };
}

function clip8(v: number): number {
  if (v >= 1 << (PRECISION_BITS + 8)) return 255;
  if (v <= 0) return 0;
  return v >> PRECISION_BITS;
}

/** Pillow's `Image.resize(..., BICUBIC)` of packed RGB bytes. */
export function resizeBicubic(src: Uint8Array, width: number, height: number, outWidth: number, outHeight: number): Uint8Array {
  let img = src;
  let w = width;
  if (outWidth !== width) {
    const { bounds, kk, ksize } = coefficients(width, outWidth);
    const out = new Uint8Array(outWidth * height * 3);
    for (let y = 0; y < height; y++) {
      for (let xx = 0; xx < outWidth; xx++) {
        const xmin = bounds[xx * 2]!;
        const xmax = bounds[xx * 2 + 1]!;
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let x = 0; x < xmax; x++) ss += img[(y * w + x + xmin) * 3 + c]! * kk[xx * ksize + x]!;
          out[(y * outWidth + xx) * 3 + c] = clip8(ss);
        }
      }
    }
    img = out;
    w = outWidth;
  }
  if (outHeight !== height) {
    const { bounds, kk, ksize } = coefficients(height, outHeight);
    const out = new Uint8Array(w * outHeight * 3);
    for (let yy = 0; yy < outHeight; yy++) {
      const ymin = bounds[yy * 2]!;
      const ymax = bounds[yy * 2 + 1]!;
      for (let x = 0; x < w; x++) {
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let y = 0; y < ymax; y++) ss += img[((y + ymin) * w + x) * 3 + c]! * kk[yy * ksize + y]!;
          out[(yy * w + x) * 3 + c] = clip8(ss);
        }
      }
    }
    img = out;
  }
  return img;
}

/** Resize, rescale and patchify packed RGB bytes as Gemma 4's processor does. */
export function preprocessImage(rgb: Uint8Array, width: number, height: number, s: VisionSettings): PreprocessedImage {
  const size = targetSize(height, width, s);
  const img = size.width === width && size.height === height ? rgb : resizeBicubic(rgb, width, height, size.width, size.height);
  const p = s.patchSize;
  const pw = size.width / p;
  const ph = size.height / p;
  const patches = pw * ph;
  const row = 3 * p * p;
  const pixelValues = new Float32Array(patches * row);
  const positions = new Int32Array(patches * 2);
  const scale = 1 / 255;
  for (let py = 0; py < ph; py++) {
    for (let px = 0; px < pw; px++) {
      const n = py * pw + px;
      positions[n * 2] = px;
      positions[n * 2 + 1] = py;
      for (let y = 0; y < p; y++) {
        for (let x = 0; x < p; x++) {
          const at = ((py * p + y) * size.width + px * p + x) * 3;
          for (let c = 0; c < 3; c++) pixelValues[n * row + (y * p + x) * 3 + c] = img[at + c]! * scale;
        }
      }
    }
  }
  const k = s.poolingKernelSize;
  return { pixelValues, positions, patches, tokens: patches / (k * k), width: size.width, height: size.height };
}
