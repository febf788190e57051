// What bench/decision.ts measures of one decision request: its phases, the event loop's delay
// while requests run, and the medians and resident memory it reports.
import { monitorEventLoopDelay } from "node:perf_hooks";

/** Where one decision request spent its time, in ms (medians when summarised). */
export interface DecisionPhases {
  total: number;
  /**
   * CPU time of the whole process (every thread: this one, the worker, ONNX Runtime's), ms.
   * Other processes on a loaded machine stretch the wall time far more than this.
   */
  cpu: number;
  /** Tokenizer encodes: the state once, each question, the labels. */
  tokenize: number;
  /** ONNX Runtime's run of the prefill forwards (the state's complete blocks). */
  prefill: number;
  /** ONNX Runtime's run of the readout forwards (one row per question). */
  rows: number;
  /** How many readout forwards. */
  rowForwards: number;
  /** The worker writing the state's key/values once per row. */
  fill: number;
  /** Every forward's trip to the worker thread and back, feeds and outputs included. */
  transport: number;
  /** The rest of the inference service's Score: building inputs, reading the logits, RPC. */
  inferenceOther: number;
  /** The decision service: validation, rendering, the softmax, RPC. */
  decisionOther: number;
  /** Of decisionOther: the probabilities (softmax, confidence) of every answer. */
  softmax: number;
}

export interface EventLoopDelay {
  maxMs: number;
  p99Ms: number;
}

/** Event-loop delay while `run` runs (1 ms resolution). */
export async function watchEventLoop<T>(run: () => Promise<T>): Promise<{ result: T; eventLoop: EventLoopDelay }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  try {
    const result = await run();
    histogram.disable();
    return { result, eventLoop: { maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6 } };
  } finally {
    histogram.disable();
  }
}

export function rssMiB(): number {
  return Math.round(process.memoryUsage().rss / 2 ** 20);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The median of each phase on its own (so the phases need not add up to the median total). */
export function medianPhases(runs: DecisionPhases[]): DecisionPhases {
  const keys = Object.keys(runs[0]!) as (keyof DecisionPhases)[];
  return Object.fromEntries(keys.map((k) => [k, median(runs.map((r) => r[k]))])) as unknown as DecisionPhases;
}
