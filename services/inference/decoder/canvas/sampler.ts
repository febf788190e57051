/**
 * The canvas family's sampler (contract v3, docs/model-contract.md "Decoding a canvas"): the
 * entropy-bound acceptance, renoising, linear temperature schedule and the stable-and-confident
 * stop of transformers' DiffusionGemma `generate`, on one row's logits `[canvas, vocab]`.
 * Random draws come in as arguments (uniforms for the samples, tokens for the noise), so tests
 * feed transformers' and this code the same draws.
 */

export interface CanvasSamplerSettings {
  maxDenoisingSteps: number;
  entropyBound: number;
  tMin: number;
  tMax: number;
  stabilityThreshold: number;
  confidenceThreshold: number;
}

/** Temperature at step `n` of `N`, where n counts the steps left (N on the first step, 1 on the last). */
export function temperatureAt(s: CanvasSamplerSettings, stepsLeft: number): number {
  return s.tMin + (s.tMax - s.tMin) * (stepsLeft / s.maxDenoisingSteps);
}

/** Per position of one row: softmax(logits / T)'s entropy, its argmax and a sample for a uniform draw. */
export interface ProcessedRow {
  entropy: Float64Array;
  argmax: Int32Array;
  sample: Int32Array;
}

/**
 * `logits` holds `positions * vocab` floats (row-major); `uniforms[i]` in [0, 1) draws position
 * i's sample by the inverse CDF (torch.multinomial's role). Argmax ties go to the lowest id.
 */
export function processRow(
  logits: Float32Array,
  positions: number,
  vocab: number,
  temperature: number,
  uniforms: ArrayLike<number>,
): ProcessedRow {
  const entropy = new Float64Array(positions);
  const argmax = new Int32Array(positions);
  const sample = new Int32Array(positions);
  const probs = new Float64Array(vocab);
  for (let i = 0; i < positions; i++) {
    const base = i * vocab;
    let max = -Infinity;
    let best = 0;
    for (let v = 0; v < vocab; v++) {
      const x = logits[base + v]! / temperature;
      if (x > max) {
        max = x;
        best = v;
      }
    }
    let sum = 0;
    for (let v = 0; v < vocab; v++) {
      const e = Math.exp(logits[base + v]! / temperature - max);
      probs[v] = e;
      sum += e;
    }
    const logSum = Math.log(sum);
    let h = 0;
    for (let v = 0; v < vocab; v++) {
      const p = probs[v]! / sum;
      if (p > 0) h -= p * (logits[base + v]! / temperature - max - logSum);
    }
    const target = (uniforms[i] ?? 0) * sum;
    let acc = 0;
    let pick = vocab - 1;
    for (let v = 0; v < vocab; v++) {
      const p = probs[v] ?? 0;
      acc += p;
      if (acc > target && p > 0) {
        pick = v;
        break;
      }
    }
    entropy[i] = h;
    argmax[i] = best;
    sample[i] = pick;
  }
  return { entropy, argmax, sample };
}

/**
 * The entropy-bound acceptance: the lowest-entropy positions, ascending (ties by position), as
 * long as the sum of their entropies minus the largest of them stays within `bound`. The first
 * is always accepted.
 */
export function acceptMask(entropy: ArrayLike<number>, bound: number): boolean[] {
  const order = Array.from({ length: entropy.length }, (_, i) => i).sort((a, b) => (entropy[a] ?? 0) - (entropy[b] ?? 0) || a - b);
  const accepted = new Array<boolean>(entropy.length).fill(false);
  let cumulative = 0;
  for (const i of order) {
    const h = entropy[i] ?? 0;
    cumulative += h;
    // Sorted ascending, so this position's entropy is the largest so far.
    if (cumulative - h > bound) break;
    accepted[i] = true;
  }
  return accepted;
}

/** One step: accepted positions take the sample, every other position takes a noise token. */
export function nextCanvas(sample: ArrayLike<number>, accepted: readonly boolean[], noise: ArrayLike<number>): Int32Array {
  const out = new Int32Array(accepted.length);
  for (let i = 0; i < accepted.length; i++) out[i] = (accepted[i] ? sample[i] : noise[i]) ?? 0;
  return out;
}

/** Uniform random tokens (a fresh canvas, or the noise of a renoise). */
export function noiseTokens(length: number, vocab: number, random: () => number): Int32Array {
  const out = new Int32Array(length);
  for (let i = 0; i < length; i++) out[i] = Math.min(vocab - 1, Math.floor(random() * vocab));
  return out;
}

/** The stable-and-confident stop of one row: stateful over the steps of one canvas. */
export class StableConfidentStop {
  private readonly history: (Int32Array | undefined)[];

  constructor(private readonly settings: CanvasSamplerSettings) {
    this.history = new Array(settings.stabilityThreshold).fill(undefined);
  }

  /** Records this step's argmax canvas; true when the canvas should stop here. */
  step(argmax: Int32Array, entropy: ArrayLike<number>): boolean {
    let stable = true;
    for (const past of this.history) {
      if (!past || past.some((t, i) => t !== argmax[i])) {
        stable = false;
        break;
      }
    }
    if (this.history.length > 0) {
      this.history.shift();
      this.history.push(argmax.slice());
    }
    let mean = 0;
    for (let i = 0; i < entropy.length; i++) mean += entropy[i] ?? 0;
    mean /= Math.max(1, entropy.length);
    return stable && mean < this.settings.confidenceThreshold;
  }
}

/** A seeded uniform generator in [0, 1) (mulberry32), for reproducible canvases. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
