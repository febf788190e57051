/**
 * The canvas decoding family (contract v3): transformers' DiffusionGemma `generate` loop on
 * ONNX Runtime, with every row in flight sharing one batched denoiser forward per step.
 * Per row: the prompt is encoded, then canvas after canvas is denoised from uniform noise
 * (sampler.ts; its per-position work over the vocabulary runs as an ONNX graph, graph-sampler.ts)
 * until it stops or runs out of steps, its argmax canvas is appended to the
 * reply and encoded onto the cache; the reply ends at the first stop token or at maxTokens.
 * Each row draws its own randomness (`CanvasDraws`), so a row's reply does not depend on
 * which rows it was batched with.
 */
import * as ort from "onnxruntime-node";
import type { ForwardTransfer } from "../forward.js";
import type { CommittedLogprob } from "../logprobs.js";
import { addTransfer, CanvasDeviceState, emptyTransfer, hostBytes, isKVFeed } from "./canvas-device.js";
import {
  batchFeeds,
  EVERY_KEY,
  emptyCache,
  everyPosition,
  LOGITS_POSITIONS,
  logitsPositionsFeed,
  type RowCache,
  storePresents,
} from "./canvas-kv.js";
import { CanvasFrontier } from "./canvas-frontier.js";
import type { CanvasModel } from "./canvas-model.js";
import type { DeviceRow } from "./graph-sampler.js";
import type { CanvasDraws, CanvasRequest, CanvasResult, CanvasStepEvent, FinishedCanvas, PromptImages } from "./canvas-request.js";
import { acceptMask, nextCanvas, StableConfidentStop, temperatureAt } from "./sampler.js";

export { seededDraws } from "./canvas-request.js";
export type { CanvasDraws, CanvasRequest, CanvasResult, CanvasStepEvent, FinishedCanvas, PromptImages };

interface Row {
  req: CanvasRequest;
  cache: RowCache;
  canvas: Int32Array;
  /** The self-conditioning embeddings on the host; undefined while they are in the device tensor (canvas-device.ts). */
  sc: Float32Array | undefined;
  stepsLeft: number;
  stop: StableConfidentStop;
  canvasIndex: number;
  reply: number[];
  steps: number;
  /** The grammar's frozen prefix of this canvas, while the reply is constrained. */
  frontier: CanvasFrontier | undefined;
  resolve(r: CanvasResult): void;
  reject(err: unknown): void;
}

export class CanvasDecoder {
  private readonly rows: Row[] = [];
  private running = false;
  /**
   * Denoiser forwards run and rows they carried (metrics), and the bytes the encoder and denoiser
   * passes moved between host and device (on the CPU provider: what they would move with every
   * tensor on the host, the GPU path's figure before canvas-device.ts).
   */
  readonly stats = { forwards: 0, rowSteps: 0, transfer: emptyTransfer() };
  private readonly device: CanvasDeviceState | undefined;

  constructor(
    private readonly model: CanvasModel,
    private readonly maxBatch = 8,
    /** Each pass's host<->device bytes (on the CPU provider: what it would move with every tensor on the host). */
    private readonly onTransfer?: (t: ForwardTransfer, pass: "encoder" | "denoiser") => void,
  ) {
    this.device = model.device === undefined ? undefined : new CanvasDeviceState(model.device);
  }

  private countTransfer(t: ForwardTransfer, pass: "encoder" | "denoiser"): void {
    addTransfer(this.stats.transfer, t);
    this.onTransfer?.(t, pass);
  }

  generate(req: CanvasRequest): Promise<CanvasResult> {
    return new Promise((resolve, reject) => {
      const { config } = this.model;
      if (req.promptIds.length + req.maxTokens + config.canvasLength > config.maxPositions) {
        reject(
          new Error(`prompt (${req.promptIds.length}) + max tokens (${req.maxTokens}) exceed the model's ${config.maxPositions} positions`),
        );
        return;
      }
      this.encode(emptyCache(config.layers), req.promptIds, req.images)
        .then((cache) => {
          const row: Row = {
            req,
            cache,
            canvas: new Int32Array(0),
            sc: new Float32Array(0),
            stepsLeft: 0,
            stop: new StableConfidentStop(config.sampler),
            canvasIndex: -1,
            reply: [],
            steps: 0,
            frontier:
              req.constraint?.grammar !== undefined
                ? new CanvasFrontier(req.constraint.grammar, config.vocabSize, req.constraint.endToken)
                : undefined,
            resolve,
            reject,
          };
          this.startCanvas(row);
          this.rows.push(row);
          if (!this.running) void this.pump();
        })
        .catch((err) => {
          req.constraint?.grammar?.dispose();
          reject(err);
        });
    });
  }

  private startCanvas(row: Row): void {
    const { config } = this.model;
    row.canvasIndex++;
    row.canvas = row.req.draws.noise(config.canvasLength, config.vocabSize);
    row.sc = new Float32Array(config.canvasLength * config.hiddenSize);
    row.stepsLeft = config.sampler.maxDenoisingSteps;
    row.stop = new StableConfidentStop(config.sampler);
  }

  /** A prompt's KV cache (the encoder pass a request starts with; tests compare it with transformers'). */
  encodePrompt(ids: readonly number[], images?: PromptImages): Promise<RowCache> {
    return this.encode(emptyCache(this.model.config.layers), ids, images);
  }

  /** Encodes `ids` onto `cache` (in place, returned): the encoder pass, its new positions after the cached ones. */
  async encode(cache: RowCache, ids: readonly number[], images?: PromptImages): Promise<RowCache> {
    const { config, encoder } = this.model;
    const S = ids.length;
    const window = config.slidingWindow;
    // Causal (within the window on sliding layers), and use_bidirectional_attention "vision": one
    // image's tokens see each other both ways (every layer).
    const imageAt = new Int32Array(S).fill(-1);
    images?.blocks.forEach(([a, b], i) => {
      imageAt.fill(i, a, b);
    });
    const feeds = batchFeeds(
      [cache],
      config.layers,
      S,
      (kind, q) => {
        const causal = [kind === "full" ? 0 : q - window + 1, q + 1] as const;
        const [a, b] = images?.blocks[imageAt[q - cache.length]!] ?? [0, 0];
        return a < b ? [causal, [cache.length + a, cache.length + b]] : [causal];
      },
      encoder.inputNames,
    );
    feeds.input_ids = new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, S]);
    feeds.position_ids = new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: S }, (_, i) => BigInt(cache.length + i)),
      [1, S],
    );
    const embeds = images?.embeds ?? new Float32Array(0);
    feeds.image_embeds = new ort.Tensor("float32", embeds, [embeds.length / config.hiddenSize, config.hiddenSize]);
    const transfer = emptyTransfer();
    for (const [name, t] of Object.entries(feeds)) transfer.toDevice[isKVFeed(name) ? "kv" : "other"] += hostBytes(t);
    const out = await encoder.run(feeds);
    const presents = config.layers.flatMap((_, l) => [
      out[`present.${l}.key`]!.data as Float32Array,
      out[`present.${l}.value`]!.data as Float32Array,
    ]);
    for (const p of presents) transfer.toHost.kv += p.byteLength;
    this.countTransfer(transfer, "encoder");
    storePresents(cache, config.layers, window, presents, S);
    return cache;
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      while (this.rows.length > 0) {
        for (const row of this.rows.filter((r) => r.req.signal?.aborted)) this.drop(row, row.req.signal?.reason ?? new Error("cancelled"));
        const batch = this.rows.slice(0, this.maxBatch);
        if (batch.length === 0) continue;
        // Round robin: the rows of this forward go to the back of the line.
        this.rows.splice(0, batch.length);
        this.rows.push(...batch);
        try {
          await this.step(batch);
        } catch (err) {
          for (const row of batch) this.drop(row, err);
        }
      }
    } finally {
      this.running = false;
      this.device?.release();
    }
  }

  private drop(row: Row, err: unknown): void {
    const i = this.rows.indexOf(row);
    if (i >= 0) this.rows.splice(i, 1);
    row.frontier?.dispose();
    row.reject(err);
  }

  private async step(batch: Row[]): Promise<void> {
    const { config, denoiser } = this.model;
    const C = config.canvasLength;
    const H = config.hiddenSize;
    const V = config.vocabSize;
    const B = batch.length;
    const transfer = emptyTransfer();
    // A constrained canvas's forced text at its start is committed before its first forward.
    for (const r of batch) {
      if (r.frontier === undefined) continue;
      await r.frontier.jumpForward(this.room(r));
      r.canvas.set(r.frontier.committed.slice(0, C));
    }
    const feeds = batchFeeds(
      batch.map((r) => r.cache),
      config.layers,
      C,
      () => EVERY_KEY,
      denoiser.inputNames,
    );
    const ids = new BigInt64Array(B * C);
    const pos = new BigInt64Array(B * C);
    const temperature = new Float32Array(B);
    batch.forEach((r, b) => {
      for (let i = 0; i < C; i++) {
        ids[b * C + i] = BigInt(r.canvas[i]!);
        pos[b * C + i] = BigInt(r.cache.length + i);
      }
      // A constrained canvas may run past max_denoising_steps; its temperature stays at t_min there.
      temperature[b] = temperatureAt(config.sampler, Math.max(0, r.stepsLeft));
    });
    let scFeed = this.device?.selfConditioning(batch);
    if (scFeed === undefined || batch.some((r) => r.sc !== undefined)) {
      scFeed = undefined;
      // Rows beyond this batch may hold theirs in the kept tensor too (more rows than maxBatch).
      if (this.rows.some((r) => r.sc === undefined))
        await this.device?.spillSelfConditioning<Row>(C * H, transfer, (r, x) => {
          if (r.sc === undefined) r.sc = x;
        });
      const sc = new Float32Array(B * C * H);
      for (const [b, r] of batch.entries()) sc.set(r.sc!, b * C * H);
      scFeed = new ort.Tensor("float32", sc, [B, C, H]);
    }
    feeds.canvas_ids = new ort.Tensor("int64", ids, [B, C]);
    feeds.position_ids = new ort.Tensor("int64", pos, [B, C]);
    feeds.self_conditioning_embeds = scFeed;
    feeds.temperature = new ort.Tensor("float32", temperature, [B]);
    if (this.model.narrowHead) feeds[LOGITS_POSITIONS] = logitsPositionsFeed(B, everyPosition(C));
    if (this.device !== undefined) {
      const lengths = batch.map((r) => r.cache.length);
      await this.device.placeFixedFeeds(batch, lengths, feeds, transfer);
    }
    for (const [name, t] of Object.entries(feeds)) transfer.toDevice[isKVFeed(name) ? "kv" : "other"] += hostBytes(t);
    const out = await denoiser.run(feeds);
    this.stats.forwards++;
    this.stats.rowSteps += B;
    const logitsOut = out.logits!;
    const scOut = out.next_self_conditioning_embeds!;
    transfer.toHost.other += hostBytes(logitsOut) + hostBytes(scOut);
    const onDevice = logitsOut.location !== "cpu";
    try {
      if (scOut.location !== "cpu" && this.device !== undefined) {
        this.device.keepSelfConditioning(batch, scOut);
        for (const r of batch) r.sc = undefined;
      } else {
        const nextSc = scOut.data as Float32Array;
        batch.forEach((r, b) => {
          r.sc = nextSc.slice(b * C * H, (b + 1) * C * H);
        });
      }
      const live = batch.map((r) => this.rows.includes(r));
      const uniforms = batch.map((r, b) => (live[b] ? r.req.draws.uniforms(C) : new Float64Array(C)));
      // On the device the batch's logits stay there: one sampler run over every row.
      const processedAll = onDevice ? await this.model.sampler.processBatch(logitsOut, C, temperature, uniforms) : undefined;
      // The sampler's feeds (uniforms, temperatures) go up; entropy, argmax and sample come back.
      if (onDevice) {
        transfer.toDevice.other += B * C * 8 + B * 4;
        transfer.toHost.other += B * C * 12;
      }
      const hostLogits = onDevice ? undefined : (logitsOut.data as Float32Array);
      // The grammar reads a constrained row's logits on the host.
      let downloaded: Float32Array | undefined;
      for (let b = 0; b < B; b++) {
        const row = batch[b]!;
        if (!live[b]) continue;
        const rowLogits: Float32Array | DeviceRow = hostLogits?.subarray(b * C * V, (b + 1) * C * V) ?? { tensor: logitsOut, row: b };
        const processed =
          processedAll?.[b] ?? (await this.model.sampler.processRow(rowLogits as Float32Array, C, temperature[b]!, uniforms[b]!));
        if (row.frontier !== undefined) {
          if (hostLogits === undefined && downloaded === undefined) {
            downloaded = await this.model.device!.download(logitsOut);
            transfer.toHost.other += downloaded.byteLength;
          }
          const host = (hostLogits ?? downloaded!).subarray(b * C * V, (b + 1) * C * V);
          await this.frontierStep(row, processed, host, rowLogits, transfer);
          continue;
        }
        const accepted = acceptMask(processed.entropy, config.sampler.entropyBound);
        const noise = row.req.draws.noise(C, V);
        row.canvas = nextCanvas(processed.sample, accepted, noise);
        row.steps++;
        const stopped = row.stop.step(processed.argmax, processed.entropy);
        const last = stopped || row.stepsLeft === 1;
        row.req.onStep?.({
          canvasIndex: row.canvasIndex,
          step: row.steps,
          canvasStep: config.sampler.maxDenoisingSteps - row.stepsLeft + 1,
          draft: Array.from(processed.argmax),
          acceptedMask: accepted,
          accepted: accepted.filter(Boolean).length,
          last,
        });
        row.stepsLeft--;
        if (last) await this.finishCanvas(row, Array.from(processed.argmax), rowLogits, transfer);
      }
    } finally {
      if (onDevice) logitsOut.dispose();
      this.countTransfer(transfer, "denoiser");
    }
  }

  /** Committed tokens go out as they are committed (not with logprobs, which are read per canvas). */
  private streamsCommits(row: Row): boolean {
    return row.req.onCommitted !== undefined && row.req.logprobs === undefined;
  }

  /** The positions of the row's canvas the reply still has room for. */
  private room(row: Row): number {
    return Math.min(this.model.config.canvasLength, row.req.maxTokens - row.reply.length);
  }

  /** One step of a constrained row: the frontier rule on its logits, the draft right of it from the sampler. */
  private async frontierStep(
    row: Row,
    processed: { entropy: ArrayLike<number>; argmax: Int32Array; sample: ArrayLike<number> },
    logits: Float32Array,
    rowLogits: Float32Array | DeviceRow,
    transfer: ForwardTransfer,
  ): Promise<void> {
    const { config } = this.model;
    const frontier = row.frontier!;
    const room = this.room(row);
    await frontier.step(logits, room);
    if (this.streamsCommits(row)) {
      const fresh = frontier.takeNew();
      if (fresh.length > 0) row.req.onCommitted?.({ tokens: fresh, canvasIndex: row.canvasIndex });
    }
    const noise = row.req.draws.noise(config.canvasLength, config.vocabSize);
    const { canvas, accepted } = frontier.nextCanvas(processed.entropy, processed.sample, noise, config.sampler.entropyBound);
    row.canvas = canvas;
    row.steps++;
    const last = frontier.done(room);
    const f = frontier.committed.length;
    row.req.onStep?.({
      canvasIndex: row.canvasIndex,
      step: row.steps,
      canvasStep: config.sampler.maxDenoisingSteps - row.stepsLeft + 1,
      draft: [...frontier.committed, ...Array.from(processed.argmax).slice(f)].slice(0, config.canvasLength),
      acceptedMask: accepted,
      accepted: accepted.filter(Boolean).length,
      last,
      committed: f,
    });
    row.stepsLeft--;
    if (last) await this.finishCanvas(row, frontier.canvasTokens(), rowLogits, transfer);
  }

  /** `logits`: the row's `[canvas, vocab]` raw logits of the canvas's last step (or its row of the batch's on the device). */
  private async finishCanvas(row: Row, argmax: number[], logits: Float32Array | DeviceRow, transfer: ForwardTransfer): Promise<void> {
    const { config } = this.model;
    const stopAt = argmax.findIndex((t) => config.stopTokenIds.includes(t));
    const room = row.req.maxTokens - row.reply.length;
    let kept = argmax.slice(0, Math.min(stopAt < 0 ? argmax.length : stopAt, room));
    // Auto tools: a free canvas that opens a call is cut after the open tag; the call is decoded under its grammar.
    const trigger = row.frontier === undefined ? row.req.constraint?.trigger : undefined;
    const opened = trigger === undefined ? -1 : kept.indexOf(trigger.token);
    if (opened >= 0) kept = kept.slice(0, opened + 1);
    row.reply.push(...kept);
    const handed = this.streamsCommits(row) ? (row.frontier?.handed ?? 0) : 0;
    const finished: FinishedCanvas = { tokens: kept.slice(Math.min(handed, kept.length)), canvasIndex: row.canvasIndex };
    if (row.req.logprobs !== undefined) {
      finished.logprobs = await this.logprobsOf(kept, logits, row.req.logprobs.top, row.steps);
      // log_z, top values and ids: what the readout brings to the host (all the batch's positions on the device).
      const positions = logits instanceof Float32Array ? kept.length : (logits.tensor.dims[0] as number) * config.canvasLength;
      transfer.toHost.other += positions * (4 + 8 * Math.max(1, row.req.logprobs.top));
    }
    const stopToken = opened < 0 && stopAt >= 0 && stopAt <= room;
    const stopped = row.req.onCanvas?.(finished) === true || stopToken;
    if (stopped || row.reply.length >= row.req.maxTokens) {
      const i = this.rows.indexOf(row);
      if (i >= 0) this.rows.splice(i, 1);
      const generated = row.reply.length + (stopToken ? 1 : 0);
      row.frontier?.dispose();
      row.resolve({
        tokens: row.reply,
        finishReason: stopped ? "stop" : "length",
        steps: row.steps,
        canvases: row.canvasIndex + 1,
        tokensPerStep: generated / Math.max(1, row.steps),
        ...(row.frontier !== undefined ? { grammar: row.frontier.report } : {}),
      });
      return;
    }
    if (opened >= 0) {
      await this.encode(row.cache, kept);
      // The grammar failing to start ends this row only, not the rows batched with it.
      const grammar = await trigger!.open(row.req.maxTokens - row.reply.length).catch((err: unknown) => {
        this.drop(row, err);
        return undefined;
      });
      if (grammar === undefined) return;
      row.frontier = new CanvasFrontier(grammar, config.vocabSize, row.req.constraint!.endToken);
    } else {
      await this.encode(row.cache, argmax);
      row.frontier?.nextCanvasStarts();
    }
    this.startCanvas(row);
  }

  /** Log-softmax over the whole vocabulary of the raw logits at each kept position (nothing banned: the sampler reads every token). */
  private async logprobsOf(
    tokens: readonly number[],
    logits: Float32Array | DeviceRow,
    top: number,
    step: number,
  ): Promise<CommittedLogprob[]> {
    const read = await this.model.sampler.logprobs(logits, tokens, top);
    return read.map((r, i) => ({ token: tokens[i]!, ...r, step }));
  }
}
