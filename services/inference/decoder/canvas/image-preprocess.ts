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
  /** Patch positions the vision tower has along each side (its `position_embedding_size`); unset: not checked. */
  positionEmbeddingSize?: number;
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

/**
 * Refuses a resized size whose patches the vision tower cannot place: a long thin image is
 * resized to more patches along one side than its position table has (a WebP of 16,383 × 2,048
 * to 94 across, against 64), which vision.onnx would fail on.
 */
export function checkPlacement(size: { height: number; width: number }, original: { height: number; width: number }, s: VisionSettings) {
  const table = s.positionEmbeddingSize;
  if (table === undefined) return;
  const across = size.width / s.patchSize;
  const down = size.height / s.patchSize;
  if (across <= table && down <= table) return;
  throw new RangeError(
    `an image of ${original.width}x${original.height} pixels is resized to ${across} x ${down} patches, ` +
      `and this model's vision tower places at most ${table} patches along a side (position_embedding_size in its config.json): ` +
      "crop it or send it less elongated",
  );
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

/**
 * Pillow's `Image.resize(..., BICUBIC)` of packed RGB bytes: the horizontal pass, then the
 * vertical one, with the same arithmetic. Pillow widens every source row before the vertical
 * pass (a 1 × 33.5M-pixel image made 48 wide: 4.8 GB); here each row is resampled when the
 * vertical pass first needs it and kept only while it is in the filter's window, so the
 * memory besides the output is one window of rows.
 */
export function resizeBicubic(src: Uint8Array, width: number, height: number, outWidth: number, outHeight: number): Uint8Array {
  const horizontal = outWidth !== width ? coefficients(width, outWidth) : undefined;
  const rowBytes = outWidth * 3;
  /** Source row `y` resampled to `outWidth` into `into` at `at`. */
  const rowOf = (y: number, into: Uint8Array, at: number) => {
    if (horizontal === undefined) {
      into.set(src.subarray(y * rowBytes, (y + 1) * rowBytes), at);
      return;
    }
    const { bounds, kk, ksize } = horizontal;
    for (let xx = 0; xx < outWidth; xx++) {
      const xmin = bounds[xx * 2]!;
      const xmax = bounds[xx * 2 + 1]!;
      for (let c = 0; c < 3; c++) {
        let ss = 1 << (PRECISION_BITS - 1);
        for (let x = 0; x < xmax; x++) ss += src[(y * width + x + xmin) * 3 + c]! * kk[xx * ksize + x]!;
        into[at + xx * 3 + c] = clip8(ss);
      }
    }
  };
  if (outHeight === height) {
    if (horizontal === undefined) return src;
    const out = new Uint8Array(rowBytes * height);
    for (let y = 0; y < height; y++) rowOf(y, out, y * rowBytes);
    return out;
  }
  const { bounds, kk, ksize } = coefficients(height, outHeight);
  // Row y lives in slot y % slots; a filter reads at most ksize consecutive rows, and its start only moves down.
  const slots = Math.min(ksize, height);
  const window = new Uint8Array(slots * rowBytes);
  let ready = 0;
  const out = new Uint8Array(rowBytes * outHeight);
  for (let yy = 0; yy < outHeight; yy++) {
    const ymin = bounds[yy * 2]!;
    const ymax = bounds[yy * 2 + 1]!;
    ready = Math.max(ready, ymin);
    for (; ready < ymin + ymax; ready++) rowOf(ready, window, (ready % slots) * rowBytes);
    for (let x = 0; x < rowBytes; x++) {
      let ss = 1 << (PRECISION_BITS - 1);
      for (let y = 0; y < ymax; y++) ss += window[((y + ymin) % slots) * rowBytes + x]! * kk[yy * ksize + y]!;
      out[yy * rowBytes + x] = clip8(ss);
    }
  }
  return out;
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
