// Temperature scaling of one question type: the labelled readouts' negative log-likelihood,
// expected calibration error and accuracy under softmax(logits / T), and the T that minimises
// the NLL (as training/pipeline/calibrate.py fits the bundled model's, and training/pipeline/evaluate.py scores it).
import { argmax, softmax } from "../../../lib/decision-types/probabilities.js";

/** One labelled question: the logits of its labels (as Score returns them) and the index of the correct one. */
export interface LabelledReadout {
  logits: readonly number[];
  target: number;
}

/** The searched range of T, as training/pipeline/calibrate.py's. */
export const MIN_TEMPERATURE = 0.05;
export const MAX_TEMPERATURE = 20;
const ECE_BINS = 15;
const GOLDEN_STEPS = 60;
// What a label with a -Infinity logit counts: finite, and the same at every temperature, so it
// neither decides the fit nor makes every temperature infinitely bad.
const IMPOSSIBLE_LOG_LIKELIHOOD = Math.log(Number.MIN_VALUE);

/** log softmax(logits / T)[target], computed without forming the probabilities (exact far into the tail). */
export function logLikelihood(r: LabelledReadout, temperature: number): number {
  const z = r.logits.map((l) => (Number.isNaN(l) ? Number.NEGATIVE_INFINITY : l));
  const max = Math.max(...z);
  if (!Number.isFinite(max)) return orImpossible(Math.log(softmax(z, temperature)[r.target] ?? 0));
  let sum = 0;
  for (const l of z) sum += Math.exp((l - max) / temperature);
  const logp = ((z[r.target] ?? Number.NEGATIVE_INFINITY) - max) / temperature - Math.log(sum);
  return orImpossible(logp);
}

function orImpossible(logp: number): number {
  return logp === Number.NEGATIVE_INFINITY || Number.isNaN(logp) ? IMPOSSIBLE_LOG_LIKELIHOOD : logp;
}

/** Mean negative log-likelihood of the correct labels. */
export function meanNll(readouts: readonly LabelledReadout[], temperature: number): number {
  let s = 0;
  for (const r of readouts) s -= logLikelihood(r, temperature);
  return s / readouts.length;
}

/** Share of readouts whose most likely label is the correct one (the same at every temperature). */
export function accuracy(readouts: readonly LabelledReadout[]): number {
  return readouts.filter((r) => argmax(softmax(r.logits)) === r.target).length / readouts.length;
}

/**
 * Expected calibration error over 15 equal-width bins of the top label's probability: the
 * first bin [0, 1/15], the others (lo, hi], as training/pipeline/evaluate.py bins them.
 */
export function expectedCalibrationError(readouts: readonly LabelledReadout[], temperature: number): number {
  const bins = Array.from({ length: ECE_BINS }, () => ({ n: 0, confidence: 0, correct: 0 }));
  for (const r of readouts) {
    const p = softmax(r.logits, temperature);
    const top = argmax(p);
    const confidence = p[top]!;
    const bin = bins[Math.min(ECE_BINS - 1, Math.max(0, Math.ceil(confidence * ECE_BINS) - 1))]!;
    bin.n++;
    bin.confidence += confidence;
    if (top === r.target) bin.correct++;
  }
  let ece = 0;
  for (const b of bins) if (b.n > 0) ece += (b.n / readouts.length) * Math.abs(b.confidence / b.n - b.correct / b.n);
  return ece;
}

/** The temperature minimising meanNll: a golden-section search on log T over [MIN_TEMPERATURE, MAX_TEMPERATURE]. */
export function fitTemperature(readouts: readonly LabelledReadout[]): number {
  if (readouts.length === 0) throw new Error("fitTemperature needs at least one labelled readout");
  const f = (logT: number) => meanNll(readouts, Math.exp(logT));
  const g = (Math.sqrt(5) - 1) / 2;
  let lo = Math.log(MIN_TEMPERATURE);
  let hi = Math.log(MAX_TEMPERATURE);
  let a = hi - g * (hi - lo);
  let b = lo + g * (hi - lo);
  let fa = f(a);
  let fb = f(b);
  for (let i = 0; i < GOLDEN_STEPS; i++) {
    if (fa < fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - g * (hi - lo);
      fa = f(a);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + g * (hi - lo);
      fb = f(b);
    }
  }
  return Math.exp((lo + hi) / 2);
}
