// Tessera's side of bench/cpu-peer.ts: a converted autoregressive model (block size 1) loaded as
// the server loads it (session on its worker thread), measured through the engine's own paths.
import { performance } from "node:perf_hooks";
import { BatchBuilder } from "../../services/inference/decoder/batch.js";
import type { ForwardRunner } from "../../services/inference/decoder/forward.js";
import { createKVCache, type KVCache } from "../../services/inference/decoder/kv-cache.js";
import { StopMatcher } from "../../services/inference/decoder/reply-text.js";
import { loadModelDir } from "../../services/inference/engine/model-dir.js";
import { createModelRuntime, type ModelRuntime } from "../../services/inference/engine/runtime.js";
import { scoreSuffixes } from "../../services/inference/score/score.js";
import { recordingRunner } from "../../test/helpers/recording-runner.js";

export interface Question {
  text: string;
  labels: string[];
}

export class TesseraSide {
  private readonly lane = {};

  private constructor(
    readonly engine: ModelRuntime,
    private readonly recorder: ReturnType<typeof recordingRunner>,
  ) {}

  static async load(dir: string, threads: number): Promise<TesseraSide> {
    const model = await loadModelDir(dir, { intraOpThreads: threads });
    let recorder: ReturnType<typeof recordingRunner> | undefined;
    const engine = createModelRuntime({
      name: "tessera",
      servingIds: ["tessera"],
      model,
      slots: 1,
      queue: 1,
      wrapRunner: (inner: ForwardRunner) => {
        recorder = recordingRunner(inner);
        return recorder;
      },
    });
    return new TesseraSide(engine, recorder!);
  }

  encode(text: string): number[] {
    return this.engine.model.tokenizer.encode(text);
  }

  /** The prompt into a fresh cache in forwards of the engine's prefill chunk (512 on the CPU), as a served prompt's. */
  async prefill(tokens: readonly number[]): Promise<{ ms: number; kv: KVCache }> {
    const { decode, prefillChunk } = this.engine;
    const kv = createKVCache(decode, tokens.length + 64, { sizeClass: true });
    const builder = new BatchBuilder(decode.kvShape, decode.blockSize, decode.padTokenId);
    const started = performance.now();
    for (let done = 0; done < tokens.length; done += prefillChunk) {
      const part = tokens.slice(done, done + prefillChunk);
      const inputs = builder.build([{ kv, tokens: part }]);
      const out = await this.engine.runner.run(inputs, { present: true, output: "none" }, this.lane);
      kv.append(out.present!, 0, inputs.past + inputs.seq, inputs.past, part.length);
      out.release?.();
    }
    return { ms: performance.now() - started, kv };
  }

  /**
   * One denoising forward of `size` tokens over `kv` (a block of the block-causal contract: every
   * token sees the block and the past), fetching the greedy readout as a denoising step does,
   * with the inputs a served step of one reply has: its cache's own arrays, spare slots blocked
   * (the scheduler's step loop, BatchPast).
   */
  async blockForward(kv: KVCache, size: number, token: number): Promise<number> {
    const { decode } = this.engine;
    const builder = new BatchBuilder(decode.kvShape, size, decode.padTokenId, { roomToGrow: true });
    const inputs = builder.build([{ kv, tokens: new Array<number>(size).fill(token) }]);
    const started = performance.now();
    await this.engine.runner.run(inputs, { present: false, output: "readout" }, this.lane);
    return performance.now() - started;
  }

  /**
   * A served greedy reply of up to `tokens` tokens after `prompt`: ms per reply token after the
   * prefill (wall time of the steps, the host loop included), and how many steps ran.
   */
  async decode(prompt: readonly number[], tokens: number): Promise<{ msPerToken: number; steps: number }> {
    const recorder = this.recorder;
    recorder.forwards.length = 0;
    const started = performance.now();
    const stream = await this.engine.scheduler.generate({
      prompt,
      maxTokens: tokens,
      policy: this.engine.policy,
      stops: new StopMatcher([]),
      decode: this.engine.model.tokenizer.decode,
    });
    for await (const _ of stream) {
      // drain
    }
    const wall = performance.now() - started;
    const prefill = recorder.forwards.filter((f) => f.fetch.output === "none");
    const steps = recorder.forwards.length - prefill.length;
    const prefillMs = prefill.reduce((sum, f) => sum + f.ms, 0);
    return { msPerToken: (wall - prefillMs) / Math.max(1, steps), steps };
  }

  /** One decision request's readout (scoreSuffixes, as /v1/systemone runs it) on `state`. */
  async decision(state: string, questions: readonly Question[]): Promise<number> {
    const started = performance.now();
    await scoreSuffixes(this.engine, { prefix: state, suffixes: questions });
    return performance.now() - started;
  }

  /** The token ids of the decision's rows, as the engine reads them (the peer is fed the same). */
  async decisionTokens(state: string, questions: readonly Question[]): Promise<{ shared: number[]; rows: number[][] }> {
    const labels = [...new Set(questions.flatMap((q) => q.labels))];
    const ids = await this.engine.model.text.scoreTokens(
      state,
      questions.map((q) => q.text),
      labels,
    );
    const common = Math.min(...ids.prompts.map((p) => p.common));
    return {
      shared: ids.prefixIds.slice(0, common),
      rows: ids.prompts.map((p) => [...ids.prefixIds.slice(common, p.common), ...p.rest]),
    };
  }

  async close(): Promise<void> {
    await this.engine.close();
  }
}
