// llama.cpp's side of bench/cpu-peer.ts, through node-llama-cpp's prebuilt CPU binaries: the same
// token ids as Tessera's side, one context sequence, its key/value cache reused as llama.cpp's
// servers reuse it (a decision's questions continue the state's cache, then are erased from it).
import { performance } from "node:perf_hooks";
import {
  getLlama,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  LlamaLogLevel,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";

let shared: Promise<Llama> | undefined;

export class LlamaSide {
  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly seq: LlamaContextSequence,
  ) {}

  /** `batch`: tokens per prompt-processing batch (llama.cpp splits a longer prompt). */
  static async load(file: string, threads: number, contextSize: number, batch: number): Promise<LlamaSide> {
    shared ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    const llama = await shared;
    const model = await llama.loadModel({ modelPath: file });
    const context = await model.createContext({ contextSize, threads, batchSize: batch, sequences: 1 });
    return new LlamaSide(model, context, context.getSequence());
  }

  /** ms to process `tokens` as a prompt into an empty cache. */
  async prefill(tokens: readonly number[]): Promise<number> {
    await this.seq.clearHistory();
    const started = performance.now();
    await this.seq.evaluateWithoutGeneratingNewTokens(tokens as Token[]);
    return performance.now() - started;
  }

  /** Greedy decode after `prompt`: ms per token from the first generated token to the `tokens`-th. */
  async decode(prompt: readonly number[], tokens: number): Promise<number> {
    await this.seq.clearHistory();
    let first = 0;
    let count = 0;
    for await (const _ of this.seq.evaluate(prompt as Token[], { temperature: 0 })) {
      count++;
      if (count === 1) first = performance.now();
      if (count >= tokens) break;
    }
    return (performance.now() - first) / Math.max(1, count - 1);
  }

  /**
   * A decision on a fresh state: the state's tokens, then each question's row on top of it with
   * the next token's logits computed at its last position (the label readout), the row erased after.
   */
  async decision(state: readonly number[], rows: readonly (readonly number[])[]): Promise<number> {
    await this.seq.clearHistory();
    const started = performance.now();
    await this.seq.evaluateWithoutGeneratingNewTokens(state as Token[]);
    for (const row of rows) {
      const items = row.map((t, i) => (i === row.length - 1 ? ([t, { generateNext: { token: true } }] as const) : t));
      await this.seq.controlledEvaluate(items as never);
      await this.seq.eraseContextTokenRanges([{ start: state.length, end: state.length + row.length }]);
    }
    return performance.now() - started;
  }

  /** The model's bytes (mapped from the GGUF file) and the context's state (its key/value cache and buffers). */
  residentBytes(): number {
    return this.model.size + this.context.stateSize;
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}
