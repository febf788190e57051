import type { Logger } from "../../../lib/logger.js";
import { BatchBuilder, type BatchRow } from "../decoder/batch.js";
import type { ForwardOutputs, ForwardRunner } from "../decoder/forward.js";
import { DenoiseTrace, type DenoiseStep } from "../decoder/denoise-trace.js";
import { Sequence, type BlockText, type DecodeModel, type Finished, type SequenceParams, type StepResult } from "../decoder/sequence.js";
import { type EngineError, ModelFailure, ShuttingDown } from "../core/engine-errors.js";
import { EventChannel } from "./event-channel.js";
import type { EngineMetrics } from "../core/metrics.js";
import { canceled, SlotPool } from "../core/slots.js";

export type GenerationEvent =
  | { type: "block"; block: BlockText }
  | { type: "step"; step: DenoiseStep }
  | { type: "finished"; finished: Finished; forwardPasses: number };

export interface SchedulerOptions {
  /** Model label for metrics and messages. */
  name: string;
  model: DecodeModel;
  /** Serialized runner shared with Score. */
  runner: ForwardRunner;
  slots: number;
  queue: number;
  /** Most prompt tokens per prefill forward (rounded down to whole blocks, at least one). */
  prefillChunk: number;
  metrics?: EngineMetrics;
  logger?: Logger;
  clock?: () => number;
}

interface Entry {
  seq: Sequence;
  channel: EventChannel<GenerationEvent>;
  cancelled: boolean;
  /** What a cancelled sequence's consumer gets. */
  cancelError: EngineError;
  failed: boolean;
  arrivedAt: number;
  admittedAt: number;
  sawBlock: boolean;
  /** Set when the caller asked for a `step` event after every denoising forward. */
  trace: DenoiseTrace | undefined;
  detach: () => void;
}

/**
 * Runs the generations of one model: N slots, a bounded wait queue and one step loop. Each
 * step batches the current block of every active sequence into ONE forward (rows padded to
 * a common P and S). A cancelled sequence leaves at the end of the step it is in and frees
 * its slot; a forward that throws is retried row by row, so only the failing sequence ends
 * (Unavailable) and the others go on.
 */
export class Scheduler {
  readonly slots: SlotPool;
  private readonly active: Entry[] = [];
  private readonly builder: BatchBuilder;
  /** Most prompt tokens per prefill forward: whole blocks. */
  readonly prefillChunk: number;
  private readonly now: () => number;
  private running = false;
  private closed = false;
  private loopDone: Promise<void> = Promise.resolve();

  constructor(private readonly options: SchedulerOptions) {
    const { model } = options;
    this.builder = new BatchBuilder(model.kvShape, model.blockSize, model.padTokenId, { roomToGrow: true });
    // Whole blocks only: a block's KV is exact only when the whole block was in one forward.
    this.prefillChunk = Math.max(model.blockSize, Math.floor(options.prefillChunk / model.blockSize) * model.blockSize);
    this.now = options.clock ?? (() => performance.now() / 1000);
    this.slots = new SlotPool(options.name, options.slots, options.queue, (busy) =>
      options.metrics?.slotsBusy.set({ model: options.name }, busy),
    );
  }

  /**
   * Waits for a slot (or refuses: Overloaded), then starts decoding. The events end with
   * `finished`; the iteration throws Unavailable if the model failed on this sequence and
   * Canceled if `signal` aborted. Leaving the iteration early cancels the sequence. With
   * `denoising`, each denoising forward also yields a `step` event (before that forward's block).
   */
  async generate(params: SequenceParams, signal?: AbortSignal, denoising = false): Promise<AsyncIterable<GenerationEvent>> {
    const arrivedAt = this.now();
    if (this.closed) throw shuttingDown(this.options.name);
    await this.slots.acquire(signal);
    let entry: Entry;
    try {
      const seq = new Sequence(this.options.model, params);
      const cancel = () => {
        entry.cancelled = true;
      };
      signal?.addEventListener("abort", cancel, { once: true });
      entry = {
        seq,
        channel: new EventChannel<GenerationEvent>(cancel),
        cancelled: signal?.aborted ?? false,
        cancelError: canceled(),
        failed: false,
        arrivedAt,
        admittedAt: this.now(),
        sawBlock: false,
        trace: denoising ? new DenoiseTrace(seq, this.options.model.blockSize) : undefined,
        detach: () => signal?.removeEventListener("abort", cancel),
      };
    } catch (err) {
      this.slots.release();
      throw err;
    }
    this.active.push(entry);
    this.kick();
    return entry.channel;
  }

  /** Runs `work` while holding one of this model's slots (Score uses the same admission). */
  async withSlot<T>(signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
    if (this.closed) throw shuttingDown(this.options.name);
    await this.slots.acquire(signal);
    const start = this.now();
    try {
      return await work();
    } finally {
      this.slots.release(this.now() - start);
    }
  }

  /** Sequences being decoded now. */
  get activeCount(): number {
    return this.active.length;
  }

  /** Refuses new work, ends waiting and running sequences (Unavailable), waits for the loop. */
  async close(): Promise<void> {
    this.closed = true;
    this.slots.rejectWaiting(shuttingDown(this.options.name));
    for (const entry of this.active) {
      entry.cancelled = true;
      entry.cancelError = shuttingDown(this.options.name);
    }
    await this.loopDone;
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    // Started on the next turn of the event loop, so requests arriving together share the first step.
    this.loopDone = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.loop())
      .finally(() => {
        this.running = false;
        if (this.active.length > 0) this.kick();
      });
  }

  private async loop(): Promise<void> {
    while (this.active.length > 0) {
      try {
        this.reap();
        for (const entry of this.active.filter((e) => !e.seq.prefilled)) await this.prefill(entry);
        this.reap();
        const ready = this.active.filter((e) => e.seq.prefilled);
        if (ready.length > 0) await this.step(ready);
        this.reap();
      } catch (err) {
        // A bug, not a model failure: end what is running rather than hang it.
        this.builder.reset();
        for (const entry of this.active) if (!entry.failed && !entry.seq.done) this.fail(entry, err);
        this.reap();
      }
    }
    // Idle: the kept batched past goes (on the device it is device memory).
    this.builder.reset();
  }

  /** One prefill forward (at most `prefillChunk` prompt tokens) for a new sequence. */
  private async prefill(entry: Entry): Promise<void> {
    if (entry.cancelled) return;
    const seq = entry.seq;
    const tokens = seq.prefillChunk(this.prefillChunk);
    const builder = new BatchBuilder(this.options.model.kvShape, this.options.model.blockSize, this.options.model.padTokenId);
    const inputs = builder.build([{ kv: seq.kv, tokens }]);
    try {
      const out = await this.options.runner.run(inputs, { present: true, output: "none" });
      this.countForward("prefill");
      seq.forwardPasses++;
      try {
        seq.applyPrefill(out, 0, inputs.past, inputs.seq, tokens.length);
      } finally {
        out.release?.();
      }
    } catch (err) {
      this.fail(entry, err);
    }
  }

  private async step(ready: Entry[]): Promise<void> {
    // Grammar-forced tokens go in before the forward (jump-forward: no forward spent on them).
    for (const entry of ready) await this.prepare(entry);
    const entries = ready.filter((e) => !e.seq.done && !e.failed);
    if (entries.length === 0) return;
    const rows: BatchRow[] = entries.map((e) => ({ kv: e.seq.kv, tokens: e.seq.stepTokens() }));
    const inputs = this.builder.build(rows);
    let out: ForwardOutputs;
    try {
      out = await this.options.runner.run(inputs, {
        present: entries.some((e) => e.seq.commitsBlock),
        output: entries.some((e) => e.seq.wantsLogits) ? "readout+logits" : "readout",
      });
    } catch (err) {
      this.builder.reset();
      this.options.logger?.warn({ err, model: this.options.name, rows: entries.length }, "batched forward failed; retrying row by row");
      for (const entry of entries) await this.stepAlone(entry);
      return;
    }
    this.countForward("denoise");
    try {
      for (const [b, entry] of entries.entries()) await this.constrain(entry, out, b, inputs.seq);
      entries.forEach((entry, b) => {
        this.apply(entry, out, b, inputs.past, inputs.seq);
      });
    } finally {
      out.release?.(); // what no row's cache took of the present on the device
    }
  }

  /** Jump-forward of a constrained sequence before a forward (grammar-forced tokens). */
  private async prepare(entry: Entry): Promise<void> {
    if (entry.cancelled || entry.failed) return;
    try {
      const result = await entry.seq.prepareStep();
      const forced = entry.trace?.afterJump();
      if (forced !== undefined) entry.channel.push({ type: "step", step: forced });
      this.deliver(entry, result);
    } catch (err) {
      this.fail(entry, err);
    }
  }

  /** The grammar's commits of a constrained sequence from this forward's logits. */
  private async constrain(entry: Entry, out: ForwardOutputs, row: number, seq: number): Promise<void> {
    if (entry.cancelled || entry.failed || !entry.seq.constrained) return;
    const started = performance.now();
    try {
      await entry.seq.constrainStep(out, row, seq);
      this.options.metrics?.grammarStepSeconds.observe({ model: this.options.name }, (performance.now() - started) / 1000);
    } catch (err) {
      this.fail(entry, err);
    }
  }

  private async stepAlone(entry: Entry): Promise<void> {
    if (entry.cancelled) return;
    const { model } = this.options;
    const builder = new BatchBuilder(model.kvShape, model.blockSize, model.padTokenId);
    const inputs = builder.build([{ kv: entry.seq.kv, tokens: entry.seq.stepTokens() }]);
    try {
      const out = await this.options.runner.run(inputs, {
        present: entry.seq.commitsBlock,
        output: entry.seq.wantsLogits ? "readout+logits" : "readout",
      });
      this.countForward("denoise");
      try {
        await entry.seq.constrainStep(out, 0, inputs.seq);
        this.apply(entry, out, 0, inputs.past, inputs.seq);
      } finally {
        out.release?.();
      }
    } catch (err) {
      this.fail(entry, err);
    }
  }

  private apply(entry: Entry, out: ForwardOutputs, row: number, past: number, seq: number): void {
    if (entry.cancelled || entry.failed) return;
    entry.seq.forwardPasses++;
    let result: StepResult;
    try {
      result = entry.seq.applyStep(out, row, past, seq);
      if (entry.trace !== undefined) entry.channel.push({ type: "step", step: entry.trace.afterForward() });
    } catch (err) {
      this.fail(entry, err);
      return;
    }
    const { metrics, name } = this.options;
    const policy = entry.seq.policyName;
    metrics?.committedPerForward.observe({ model: name, policy }, entry.seq.lastCommitted);
    if (result.block !== undefined || result.finished !== undefined) {
      metrics?.forwardsPerBlock.observe({ model: name, policy }, entry.seq.lastBlockSteps);
    }
    this.deliver(entry, result);
  }

  /** Sends a step's block and end to the sequence's consumer. */
  private deliver(entry: Entry, result: StepResult): void {
    const { metrics, name } = this.options;
    if (!entry.sawBlock && (result.block !== undefined || result.finished !== undefined)) {
      // The first committed block, or the end of a reply shorter than one block.
      entry.sawBlock = true;
      this.options.metrics?.timeToFirstBlock.observe({ model: this.options.name }, this.now() - entry.arrivedAt);
    }
    if (result.block !== undefined) entry.channel.push({ type: "block", block: result.block });
    if (result.finished !== undefined) {
      metrics?.generatedTokens.inc({ model: name }, result.finished.completionTokens);
      if (result.finished.grammar !== undefined) metrics?.jumpForwardTokens.inc({ model: name }, result.finished.grammar.forced);
      metrics?.requestDuration.observe({ model: name }, this.now() - entry.arrivedAt);
      entry.channel.push({ type: "finished", finished: result.finished, forwardPasses: entry.seq.forwardPasses });
      entry.channel.end();
    }
  }

  private fail(entry: Entry, err: unknown): void {
    entry.failed = true;
    this.options.logger?.error({ err, model: this.options.name }, "model forward failed for a sequence");
    const message = err instanceof Error ? err.message : String(err);
    entry.channel.fail(new ModelFailure(`model "${this.options.name}" failed on this request: ${message}`));
  }

  /** Removes finished, failed and cancelled sequences and frees their slots. */
  private reap(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const entry = this.active[i]!;
      if (!entry.seq.done && !entry.failed && !entry.cancelled) continue;
      this.active.splice(i, 1);
      entry.detach();
      entry.seq.release();
      if (entry.cancelled && !entry.seq.done && !entry.failed) entry.channel.fail(entry.cancelError);
      this.slots.release(this.now() - entry.admittedAt);
    }
  }

  private countForward(phase: "prefill" | "denoise"): void {
    this.options.metrics?.forwardPasses.inc({ model: this.options.name, phase });
  }
}

function shuttingDown(name: string): ShuttingDown {
  return new ShuttingDown(`model "${name}" is shutting down`);
}
