/**
 * The canvas sampler's per-step work on ONNX Runtime (sampler-graphs.ts): per row of the
 * denoiser's logits, softmax(logits / T)'s entropy, argmax and inverse-CDF sample for the row's
 * uniforms, and on a canvas's last step the logprob readout of its reply tokens. What reaches
 * the host is a few numbers per position; the accept rule, renoise and stop (sampler.ts) run
 * on those. A row's positions run a few at a time (about a million logits a run): each
 * operator's scratch then stays in the CPU's cache, which measured 1.6x faster than the whole row.
 */
import * as ort from "onnxruntime-node";
import type { TokenChoice } from "../logprobs.js";
import type { ProcessedRow } from "./sampler.js";
import { logprobGraph, samplerGraph } from "./sampler-graphs.js";
import { sessionHostReady } from "../../onnx/onnx-host-client.js";
import { WorkerSession } from "../../onnx/onnx-worker-session.js";

/** Logits per sampler run on the CPU: 4 positions of the 26B's vocabulary (4 MiB of float32). */
const CHUNK_ELEMENTS = 2 ** 20;

/** One row of a batch's logits left on the device: `tensor` `[B, positions, vocab]`, row `row`. */
export interface DeviceRow {
  tensor: ort.Tensor;
  row: number;
}

export class GraphSampler {
  private constructor(
    private readonly sampler: ort.InferenceSession,
    private readonly readout: ort.InferenceSession,
    readonly vocab: number,
  ) {}

  /**
   * The graphs for a model of `vocab` tokens, on the sessions' execution provider (the CPU unless
   * `sessionOptions` say); with `onWorker` each on a worker thread (onnx-worker-session.ts), so
   * its runs do not hold the event loop (CPU only: a device tensor lives in the thread that made it).
   */
  static async create(
    vocab: number,
    sessionOptions: ort.InferenceSession.SessionOptions = { executionProviders: ["cpu"] },
    onWorker = false,
  ): Promise<GraphSampler> {
    if (onWorker) await sessionHostReady();
    const open = (graph: Uint8Array) =>
      onWorker ? WorkerSession.open(graph, sessionOptions) : ort.InferenceSession.create(graph, sessionOptions);
    const sampler = await open(samplerGraph(vocab));
    const readout = await open(logprobGraph());
    return new GraphSampler(sampler, readout, vocab);
  }

  /** processRow's result for one row: `logits` `[positions, vocab]` (a host array, or a device tensor `[1, positions, vocab]` run whole). */
  async processRow(
    logits: Float32Array | ort.Tensor,
    positions: number,
    temperature: number,
    uniforms: ArrayLike<number>,
  ): Promise<ProcessedRow> {
    const result: ProcessedRow = {
      entropy: new Float64Array(positions),
      argmax: new Int32Array(positions),
      sample: new Int32Array(positions),
    };
    const V = this.vocab;
    const step = logits instanceof Float32Array ? Math.max(1, Math.floor(CHUNK_ELEMENTS / V)) : positions;
    const t = new ort.Tensor("float32", Float32Array.of(temperature), [1]);
    for (let from = 0; from < positions; from += step) {
      const n = Math.min(step, positions - from);
      const out = await this.sampler.run({
        logits: logits instanceof Float32Array ? new ort.Tensor("float32", logits.subarray(from * V, (from + n) * V), [1, n, V]) : logits,
        temperature: t,
        uniforms: new ort.Tensor(
          "float64",
          Float64Array.from({ length: n }, (_, i) => uniforms[from + i] ?? 0),
          [1, n],
        ),
      });
      result.entropy.set(out.entropy!.data as Float32Array, from);
      result.argmax.set(out.argmax!.data as Int32Array, from);
      result.sample.set(out.sample!.data as Int32Array, from);
    }
    return result;
  }

  /**
   * processRow for every row of a batch's logits left on the device (`[B, positions, vocab]`,
   * one run): `temperatures` and `uniforms` per row. What comes to the host is 12 bytes a position.
   */
  async processBatch(
    logits: ort.Tensor,
    positions: number,
    temperatures: Float32Array,
    uniforms: readonly ArrayLike<number>[],
  ): Promise<ProcessedRow[]> {
    const B = temperatures.length;
    const u = new Float64Array(B * positions);
    uniforms.forEach((row, b) => {
      for (let i = 0; i < positions; i++) u[b * positions + i] = row[i] ?? 0;
    });
    const out = await this.sampler.run({
      logits,
      temperature: new ort.Tensor("float32", temperatures, [B]),
      uniforms: new ort.Tensor("float64", u, [B, positions]),
    });
    const entropy = out.entropy!.data as Float32Array;
    const argmax = out.argmax!.data as Int32Array;
    const sample = out.sample!.data as Int32Array;
    return Array.from({ length: B }, (_, b) => ({
      entropy: Float64Array.from(entropy.subarray(b * positions, (b + 1) * positions)),
      argmax: argmax.slice(b * positions, (b + 1) * positions),
      sample: sample.slice(b * positions, (b + 1) * positions),
    }));
  }

  /**
   * logprobsAt's result (nothing banned) at positions 0..tokens.length-1 of `logits`
   * `[>= tokens.length, vocab]`, whose tokens are those positions' argmax (the canvas's reply).
   */
  async logprobs(
    logits: Float32Array | DeviceRow,
    tokens: readonly number[],
    top: number,
  ): Promise<{ logprob: number; top: TokenChoice[] }[]> {
    const V = this.vocab;
    const k = Math.max(1, top);
    const kTensor = new ort.Tensor("int64", BigInt64Array.of(BigInt(k)), [1]);
    const host = logits instanceof Float32Array;
    const step = host ? Math.max(1, Math.floor(CHUNK_ELEMENTS / V)) : tokens.length;
    const result: { logprob: number; top: TokenChoice[] }[] = [];
    for (let from = 0; from < tokens.length; from += step) {
      const n = Math.min(step, tokens.length - from);
      // A device tensor is read whole (`[B, positions, vocab]`, one run) and its row picked here.
      const out = await this.readout.run({
        logits: host ? new ort.Tensor("float32", logits.subarray(from * V, (from + n) * V), [n, V]) : logits.tensor,
        k: kTensor,
      });
      const first = host ? 0 : logits.row * (logits.tensor.dims[1] as number);
      const logZ = (out.log_z!.data as Float32Array).subarray(first);
      const values = (out.top_logits!.data as Float32Array).subarray(first * k);
      const ids = (out.top_ids!.data as Int32Array).subarray(first * k);
      for (let i = 0; i < n; i++) {
        const token = tokens[from + i]!;
        if (ids[i * k] !== token)
          throw new Error(`logprob readout: position ${from + i}'s reply token ${token} is not its argmax ${ids[i * k]}`);
        const at = (j: number): TokenChoice => ({ token: ids[i * k + j]!, logprob: Math.min(0, values[i * k + j]! - logZ[i]!) });
        result.push({ logprob: at(0).logprob, top: Array.from({ length: top }, (_, j) => at(j)) });
      }
    }
    return result;
  }

  async release(): Promise<void> {
    await this.sampler.release();
    await this.readout.release();
  }
}
