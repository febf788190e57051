import { performance } from "node:perf_hooks";
import type * as ort from "onnxruntime-node";
import { lastWorkerRun } from "../onnx/onnx-worker-session.js";

/** One kind of forward of a Score request, summed. */
export interface ForwardTiming {
  forwards: number;
  /** Batch rows x positions of every forward, padding included. */
  tokens: number;
  /** Sum over the forwards of each one's past length (keys each query attends to besides the forward's own). */
  past: number;
  /** Each forward's trip through the engine's runner: queueing behind other requests' forwards, the worker, ONNX Runtime. */
  wallMs: number;
  /** ONNX Runtime's run alone (the worker thread's timing; the wall time on a main-thread session). */
  runMs: number;
  /** The worker writing the past's rows into the feeds (readout forwards over a shared past). */
  fillMs: number;
}

/**
 * Where one Score request (a decision's model work) spent its time, in ms. The inference
 * service logs it at debug level ("score timing"; TESSERA_LOG_LEVEL=debug), and
 * bench/full_size/serve.ts sets it against the forward times of bench/full_size/forward.py.
 */
export interface ScoreTiming {
  totalMs: number;
  /** The state, every question and every label through the tokenizer. */
  tokenizeMs: number;
  /** Waiting for a generation slot. */
  queueMs: number;
  /** The state's complete blocks (and long questions' own blocks) into a cache. */
  prefill: ForwardTiming;
  /** The readout forwards: each question's row over the state's past. */
  rows: ForwardTiming;
  /** Copying key/values on this thread: presents into the cache, the past into the readout feeds. */
  kvCopyMs: number;
  /** Reading the answer slots' logits (log-softmax over the vocabulary for multi-token labels). */
  readoutMs: number;
}

const forwardTiming = (): ForwardTiming => ({ forwards: 0, tokens: 0, past: 0, wallMs: 0, runMs: 0, fillMs: 0 });

export class ScoreTimer {
  readonly timing: ScoreTiming = {
    totalMs: 0,
    tokenizeMs: 0,
    queueMs: 0,
    prefill: forwardTiming(),
    rows: forwardTiming(),
    kvCopyMs: 0,
    readoutMs: 0,
  };
  private readonly started = performance.now();

  /** Runs `work`, adding its time to `key`. */
  async time<T>(key: "tokenizeMs" | "queueMs", work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await work();
    } finally {
      this.timing[key] += performance.now() - start;
    }
  }

  /** Runs synchronous `work`, adding its time to `key`. */
  timeSync<T>(key: "kvCopyMs" | "readoutMs", work: () => T): T {
    const start = performance.now();
    try {
      return work();
    } finally {
      this.timing[key] += performance.now() - start;
    }
  }

  /** Runs one forward of `kind` over `shape` (batch, positions, past), on `session`. */
  async forward<T>(
    kind: "prefill" | "rows",
    shape: { batch: number; seq: number; past: number },
    session: ort.InferenceSession,
    run: () => Promise<T>,
  ): Promise<T> {
    const start = performance.now();
    const out = await run();
    const wallMs = performance.now() - start;
    const worker = lastWorkerRun(session);
    const t = this.timing[kind];
    t.forwards += 1;
    t.tokens += shape.batch * shape.seq;
    t.past += shape.past;
    t.wallMs += wallMs;
    t.runMs += worker?.runMs ?? wallMs;
    t.fillMs += worker?.fillMs ?? 0;
    return out;
  }

  done(): ScoreTiming {
    this.timing.totalMs = performance.now() - this.started;
    return this.timing;
  }
}
