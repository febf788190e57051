/**
 * The canvas sampler's per-step work on ONNX Runtime (sampler-graphs.ts): per row of the
 * denoiser's logits, softmax(logits / T)'s entropy, argmax and inverse-CDF sample for the row's
 * uniforms, and on a canvas's last step the logprob readout of its reply tokens. What reaches
 * the host is a few numbers per position; the accept rule, renoise and stop (sampler.ts) run
 * on those. Rows run one at a time, so the graph's scratch stays one row's `[canvas, vocab]`.
 */
import * as ort from "onnxruntime-node";
import type { TokenChoice } from "../logprobs.js";
import type { ProcessedRow } from "./sampler.js";
import { logprobGraph, type SamplerPrecision, samplerGraph } from "./sampler-graphs.js";

export interface GraphSamplerOptions {
  precision?: SamplerPrecision;
  sessionOptions?: ort.InferenceSession.SessionOptions;
}

export class GraphSampler {
  private constructor(
    private readonly sampler: ort.InferenceSession,
    private readonly readout: ort.InferenceSession,
    readonly precision: SamplerPrecision,
  ) {}

  static async create(options: GraphSamplerOptions = {}): Promise<GraphSampler> {
    const precision = options.precision ?? "float64";
    const sessionOptions = options.sessionOptions ?? { executionProviders: ["cpu"] };
    const sampler = await ort.InferenceSession.create(samplerGraph(precision), sessionOptions);
    const readout = await ort.InferenceSession.create(logprobGraph(precision), sessionOptions);
    return new GraphSampler(sampler, readout, precision);
  }

  private realTensor(values: ArrayLike<number>, dims: number[]): ort.Tensor {
    return this.precision === "float64"
      ? new ort.Tensor("float64", Float64Array.from(values), dims)
      : new ort.Tensor("float32", Float32Array.from(values), dims);
  }

  /** processRow's result for one row: `logits` `[positions, vocab]` (a host array or a device tensor of that shape). */
  async processRow(
    logits: Float32Array | ort.Tensor,
    positions: number,
    vocab: number,
    temperature: number,
    uniforms: ArrayLike<number>,
  ): Promise<ProcessedRow> {
    const input = logits instanceof Float32Array ? new ort.Tensor("float32", logits, [1, positions, vocab]) : logits;
    const out = await this.sampler.run({
      logits: input,
      temperature: this.realTensor([temperature], [1]),
      uniforms: this.realTensor(uniforms, [1, positions]),
    });
    const entropy = out.entropy!.data as Float64Array | Float32Array;
    return {
      entropy: entropy instanceof Float64Array ? entropy : Float64Array.from(entropy),
      argmax: out.argmax!.data as Int32Array,
      sample: out.sample!.data as Int32Array,
    };
  }

  /**
   * logprobsAt's result (nothing banned) at positions 0..tokens.length-1 of `logits`
   * `[>= tokens.length, vocab]`, whose tokens are those positions' argmax (the canvas's reply).
   */
  async logprobs(
    logits: Float32Array,
    vocab: number,
    tokens: readonly number[],
    top: number,
  ): Promise<{ logprob: number; top: TokenChoice[] }[]> {
    const P = tokens.length;
    if (P === 0) return [];
    const k = Math.max(1, top);
    const out = await this.readout.run({
      logits: new ort.Tensor("float32", logits.subarray(0, P * vocab), [P, vocab]),
      k: new ort.Tensor("int64", BigInt64Array.of(BigInt(k)), [1]),
    });
    const logZ = out.log_z!.data as Float64Array | Float32Array;
    const values = out.top_logits!.data as Float32Array;
    const ids = out.top_ids!.data as Int32Array;
    return tokens.map((token, i) => {
      if (ids[i * k] !== token) throw new Error(`logprob readout: position ${i}'s reply token ${token} is not its argmax ${ids[i * k]}`);
      const at = (j: number): TokenChoice => ({ token: ids[i * k + j]!, logprob: Math.min(0, values[i * k + j]! - logZ[i]!) });
      return { logprob: at(0).logprob, top: Array.from({ length: top }, (_, j) => at(j)) };
    });
  }

  async release(): Promise<void> {
    await this.sampler.release();
    await this.readout.release();
  }
}
