// The readout math of decisions: calibrated softmax over the offered labels, and the answer
// of each question type. Pure float64 functions; every result is finite and in range, whatever
// the logits (NaN, ±Infinity, huge magnitudes) or the temperature.

/** Softmax of logits / temperature in float64, max-subtracted so nothing overflows. */
export function softmax(logits: readonly number[], temperature = 1): number[] {
  const k = logits.length;
  if (k === 0) return [];
  const t = Number.isFinite(temperature) && temperature > 0 ? temperature : 1;
  // NaN is no evidence for an option; +Infinity is certainty (shared among the infinite ones).
  const clean = logits.map((l) => (Number.isNaN(l) ? Number.NEGATIVE_INFINITY : l));
  const max = Math.max(...clean);
  if (max === Number.NEGATIVE_INFINITY) return uniform(k);
  if (max === Number.POSITIVE_INFINITY) {
    const top = clean.filter((l) => l === max).length;
    return clean.map((l) => (l === max ? 1 / top : 0));
  }
  // (l - max) <= 0 before dividing, so a tiny temperature gives -Infinity (exp 0), never NaN.
  const exps = clean.map((l) => Math.exp((l - max) / t));
  let sum = 0;
  for (const e of exps) sum += e; // >= 1: the max term is exp(0)
  return exps.map((e) => e / sum);
}

/** Index of the largest probability; the first one on ties. */
export function argmax(p: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < p.length; i++) if ((p[i] as number) > (p[best] as number)) best = i;
  return best;
}

/** Shannon entropy in nats; 0·ln 0 = 0. */
export function entropy(p: readonly number[]): number {
  let h = 0;
  for (const pi of p) if (pi > 0) h -= pi * Math.log(pi);
  return h;
}

/** 1 − H(p)/ln K: 1 when certain, 0 when uniform, 1 when K = 1; clamped into [0, 1]. */
export function confidence(p: readonly number[]): number {
  if (p.length <= 1) return 1;
  return clamp(1 - entropy(p) / Math.log(p.length), 0, 1);
}

export interface NoulResult {
  /** P(yes). */
  probability: number;
}

/** logits = [yes, no] (the order of `labels.noul`). */
export function noulFromLogits(logits: readonly number[], temperature = 1): NoulResult {
  const p = softmax(logits, temperature);
  return { probability: clamp(p[0] ?? 0, 0, 1) };
}

export interface ChoiceResult {
  /** Index of the chosen option. */
  index: number;
  /** One probability per option, in the order of the logits; they sum to 1. */
  probabilities: number[];
  confidence: number;
}

export function choiceFromLogits(logits: readonly number[], temperature = 1): ChoiceResult {
  const probabilities = softmax(logits, temperature).map((p) => clamp(p, 0, 1));
  return { index: argmax(probabilities), probabilities, confidence: confidence(probabilities) };
}

export interface ScoreResult {
  /** Σ i·p_i with levels numbered from 0. */
  score: number;
  probabilities: number[];
  confidence: number;
}

export function scoreFromLogits(logits: readonly number[], temperature = 1): ScoreResult {
  const probabilities = softmax(logits, temperature).map((p) => clamp(p, 0, 1));
  let score = 0;
  probabilities.forEach((p, i) => {
    score += i * p;
  });
  return {
    score: clamp(score, 0, Math.max(0, probabilities.length - 1)),
    probabilities,
    confidence: confidence(probabilities),
  };
}

function uniform(k: number): number[] {
  return Array.from({ length: k }, () => 1 / k);
}

function clamp(x: number, lo: number, hi: number): number {
  if (Number.isNaN(x)) return lo;
  return Math.min(hi, Math.max(lo, x));
}
