/**
 * The label distribution of a canvas model (contract v3, docs/model-contract.md "Decisions on a
 * canvas model"): the denoiser's first step of the reply's first canvas. A prompt already
 * encoded (its RowCache) is followed by a canvas of uniform noise, zero self-conditioning,
 * exactly what `generate` runs first; the distribution of the reply's first token is
 * softmax(logits) at canvas position 0 (the soft-capped logits, before any temperature). It is
 * read on DECISION_DRAWS fixed noise canvases and averaged, so it is deterministic and the
 * noise's part in it is averaged down. Where the denoiser takes LOGITS_POSITIONS, its head runs
 * at position 0 only (`[B, 1, V]` logits instead of `[B, C, V]`).
 */
import * as ort from "onnxruntime-node";
import { batchFeeds, EVERY_KEY, everyPosition, LOGITS_POSITIONS, logitsPositionsFeed, type RowCache } from "./canvas-kv.js";
import type { CanvasConfig, CanvasModel } from "./canvas-model.js";
import { seededDraws } from "./canvas-decoder.js";
import { canceled } from "../../core/slots.js";

/** Noise canvases each readout is averaged over. */
export const DECISION_DRAWS = 4;

/** Draw k's canvas is the first noise of seededDraws(DECISION_NOISE_SEED + k): the same for every request. */
export const DECISION_NOISE_SEED = 0x7e55e4a;

/** Floats one denoiser forward of a readout may allocate (logits, inputs, masks, past copies), about 64 MB. */
const FORWARD_BUDGET = 16 * 1024 * 1024;

/** The fixed noise canvases of the decision readout (tests hand the same ones to transformers). */
export function decisionNoise(config: Pick<CanvasConfig, "canvasLength" | "vocabSize">): Int32Array[] {
  return Array.from({ length: DECISION_DRAWS }, (_, k) =>
    seededDraws(DECISION_NOISE_SEED + k).noise(config.canvasLength, config.vocabSize),
  );
}

/** One prompt to read: its cache and the token ids whose mean probability at canvas position 0 is wanted. */
export interface FirstTokenRead {
  cache: RowCache;
  tokens: readonly number[];
  /** Called once with the mean over the draws of p(token), in the order of `tokens`. */
  done(probabilities: number[]): void;
}

export interface ReadoutOptions {
  /** Most canvas positions of one forward (the decision row cap); at least one canvas. */
  maxForwardTokens: number;
  signal?: AbortSignal | undefined;
  /** Called after each denoiser forward (metrics). */
  onForward?: () => void;
  /** Other noise canvases than decisionNoise's (bench/canvas-decision.ts measures the readout's spread over draws). */
  noise?: Int32Array[];
  /**
   * Compute the head at every canvas position even where the denoiser can narrow it to
   * position 0 (the readout before narrowing: tests and bench/canvas-decision.ts compare the two).
   */
  wholeHead?: boolean;
}

/**
 * Batches readouts into denoiser forwards: each read is DECISION_DRAWS batch rows (one per
 * noise canvas); consecutive reads over caches of the same length share a forward, which runs
 * once the next row would pass the memory budget or the row cap, or has another length. Rows
 * of one forward then need no padding, and a row's logits are the same to the last bit whatever
 * other rows share its forward (padding the past to the longest row moved the tiny model's
 * answers by about 3e-6 in log-probability as questions were added or removed). A read's cache
 * is let go once its forward has run: at most one forward's caches are held besides the caller's.
 */
export class FirstTokenReadout {
  private readonly noise: Int32Array[];
  private pending: { read: FirstTokenRead; draw: number; sums: Float64Array; left: { n: number } }[] = [];
  private pendingFloats = 0;

  constructor(
    private readonly model: CanvasModel,
    private readonly options: ReadoutOptions,
  ) {
    this.noise = options.noise ?? decisionNoise(model.config);
  }

  /** Queues a read; its forwards run as the batch fills, or at flush(). */
  async add(read: FirstTokenRead): Promise<void> {
    const sums = new Float64Array(read.tokens.length);
    const draws = this.noise.length;
    const left = { n: draws };
    for (let draw = 0; draw < draws; draw++) {
      const floats = this.rowFloats(read.cache);
      const first = this.pending[0]?.read.cache;
      if (
        first !== undefined &&
        (first.length !== read.cache.length || this.pendingFloats + floats > FORWARD_BUDGET || this.pending.length + 1 > this.maxRows())
      ) {
        await this.flush();
      }
      this.pending.push({ read, draw, sums, left });
      this.pendingFloats += floats;
    }
  }

  /** Runs the queued rows. */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const rows = this.pending;
    this.pending = [];
    this.pendingFloats = 0;
    if (this.options.signal?.aborted) throw canceled();
    const logits = await this.forward(rows.map((r) => ({ cache: r.read.cache, canvas: this.noise[r.draw]! })));
    const { vocabSize: V } = this.model.config;
    const perRow = logits.length / rows.length; // V narrowed, C * V whole; position 0 first either way
    rows.forEach((row, b) => {
      const p = softmaxAt(logits, b * perRow, V);
      row.read.tokens.forEach((t, j) => {
        row.sums[j]! += p(t) / this.noise.length;
      });
      if (--row.left.n === 0) row.read.done(Array.from(row.sums));
    });
  }

  /** Whether the head runs at canvas position 0 only. */
  private get narrowed(): boolean {
    return this.model.narrowHead && this.options.wholeHead !== true;
  }

  private maxRows(): number {
    return Math.max(1, Math.floor(this.options.maxForwardTokens / this.model.config.canvasLength));
  }

  /** Floats one batch row over `cache` costs in a forward. */
  private rowFloats(cache: RowCache): number {
    const { canvasLength: C, vocabSize: V, hiddenSize: H, layers } = this.model.config;
    const past = layers.reduce((sum, l, i) => sum + 2 * l.kvHeads * cache.layers[i]!.length * l.headDim, 0);
    return (this.narrowed ? V : C * V) + 3 * C * H + 2 * C * (cache.length + C) + past;
  }

  /** One denoiser forward: each row's noise canvas after its cache, first step (zero self-conditioning). */
  private async forward(rows: { cache: RowCache; canvas: Int32Array }[]): Promise<Float32Array> {
    const { config, denoiser } = this.model;
    const { canvasLength: C, hiddenSize: H } = config;
    const B = rows.length;
    const feeds = batchFeeds(
      rows.map((r) => r.cache),
      config.layers,
      C,
      () => EVERY_KEY,
      denoiser.inputNames,
    );
    const ids = new BigInt64Array(B * C);
    const pos = new BigInt64Array(B * C);
    rows.forEach((r, b) => {
      for (let i = 0; i < C; i++) {
        ids[b * C + i] = BigInt(r.canvas[i]!);
        pos[b * C + i] = BigInt(r.cache.length + i);
      }
    });
    feeds.canvas_ids = new ort.Tensor("int64", ids, [B, C]);
    feeds.position_ids = new ort.Tensor("int64", pos, [B, C]);
    feeds.self_conditioning_embeds = new ort.Tensor("float32", new Float32Array(B * C * H), [B, C, H]);
    // The first step's temperature; it only shapes next_self_conditioning_embeds, which is not read.
    feeds.temperature = new ort.Tensor("float32", new Float32Array(B).fill(config.sampler.tMax), [B]);
    if (this.model.narrowHead) feeds[LOGITS_POSITIONS] = logitsPositionsFeed(B, this.narrowed ? [0] : everyPosition(C));
    const device = this.model.device;
    if (device === undefined) {
      const out = await denoiser.run(feeds, ["logits"]);
      this.options.onForward?.();
      return out.logits!.data as Float32Array;
    }
    // On a device the session runs with every output fetched (fetching a subset fails there);
    // the logits (`[B, 1, V]` where the head is narrowed) come to the host, the rest is freed.
    const out = await denoiser.run(feeds);
    this.options.onForward?.();
    try {
      const logits = out.logits!;
      return logits.location === "cpu" ? (logits.data as Float32Array) : await device.download(logits);
    } finally {
      for (const t of Object.values(out)) if (t.location !== "cpu") t.dispose();
    }
  }
}

/** softmax(logits[offset .. offset + V)) in float64, as a lookup by token id. */
function softmaxAt(logits: Float32Array, offset: number, V: number): (token: number) => number {
  let max = -Infinity;
  for (let v = 0; v < V; v++) max = Math.max(max, logits[offset + v]!);
  let sum = 0;
  for (let v = 0; v < V; v++) sum += Math.exp(logits[offset + v]! - max);
  return (token) => Math.exp(logits[offset + token]! - max) / sum;
}
