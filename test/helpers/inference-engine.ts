import type { ForwardFetch, ForwardInputs, ForwardOutputs, ForwardRunner, LayerKV } from "../../services/inference/decoder/forward.js";
import { type Commit, mostConfident, type UnmaskPolicy } from "../../services/inference/decoder/policies/policy.js";
import { bannedTokens } from "../../services/inference/core/banned-tokens.js";
import { guessAt, guessWithTop, readoutGuess, type Guess } from "../../services/inference/decoder/unmask.js";
import type { ModelDir } from "../../services/inference/engine/model-dir.js";

export { type RecordedForward, recordingRunner } from "./recording-runner.js";
export { TINY_MODEL_DIR } from "./tiny-model.js";

/** Whether any row of a forward holds `token` among its current tokens. */
export function inputHasToken(inputs: ForwardInputs, token: number): boolean {
  const t = BigInt(token);
  return inputs.inputIds.some((id) => id === t);
}

/** One forward of `tokens` alone, no past: the full block-causal prompt recomputed. */
export async function fullForward(
  model: ModelDir,
  runner: ForwardRunner,
  tokens: readonly number[],
  output: ForwardFetch["output"] = "logits",
): Promise<ForwardOutputs> {
  const S = tokens.length;
  const block = model.config.blockSize;
  const mask = new Float32Array(S * S);
  for (let i = 0; i < S; i++) {
    for (let j = 0; j < S; j++) mask[i * S + j] = Math.floor(j / block) <= Math.floor(i / block) ? 0 : -1e9;
  }
  const empty: LayerKV[] = Array.from({ length: model.config.numLayers }, () => ({
    key: new Float32Array(0),
    value: new Float32Array(0),
  }));
  return runner.run(
    {
      batch: 1,
      seq: S,
      past: 0,
      inputIds: BigInt64Array.from(tokens, (t) => BigInt(t)),
      positionIds: BigInt64Array.from(tokens, (_, i) => BigInt(i)),
      attentionMask: mask,
      pastKeyValues: empty,
    },
    { present: false, output },
  );
}

export interface ReferenceResult {
  /** Reply tokens after trimming (end of turn excluded). */
  tokens: number[];
  reason: "stop" | "length";
  /** Denoising steps (forwards over the reply). */
  steps: number;
  /** Tokens committed at each step. */
  committedPerStep: number[];
}

/**
 * Block diffusion decoding with no cache at all: every step runs the whole sequence (prompt,
 * committed blocks, the current block with its masks) from position 0. It reads the same
 * greedy readout as the engine (the model's in-graph one, else computed from the logits) and
 * asks the same unmasking policy, keeping its own history of guesses.
 */
export async function referenceGenerate(
  model: ModelDir,
  runner: ForwardRunner,
  prompt: readonly number[],
  options: { maxTokens: number; policy: UnmaskPolicy },
): Promise<ReferenceResult> {
  const c = model.config;
  const banned = bannedTokens(c.vocabSize, [c.maskTokenId, c.padTokenId]);
  const n = prompt.length;
  const reply: number[] = [];
  const committedPerStep: number[] = [];
  let blockStart = Math.floor(n / c.blockSize) * c.blockSize;
  for (;;) {
    const length = Math.min(c.blockSize, c.maxPositions - blockStart);
    const fixed = blockStart < n ? prompt.slice(blockStart) : [];
    const block = [...fixed, ...new Array<number>(length - fixed.length).fill(c.maskTokenId)];
    const masked = block.map((_, j) => j >= fixed.length);
    const history: Guess[][] = [];
    const policy = options.policy;
    const topK = policy.topK ?? 1;
    const wantsLogits = policy.needsLogits === true || topK > 1;
    for (;;) {
      const tokens = [...prompt, ...reply, ...block.slice(fixed.length)];
      const out = await fullForward(model, runner, tokens, wantsLogits ? "readout+logits" : "readout");
      const guesses: Guess[] = [];
      for (let j = 0; j < length; j++) {
        if (!masked[j]) continue;
        const at = blockStart + j;
        const offset = at * c.vocabSize;
        guesses.push(
          out.readout !== undefined && topK === 1
            ? readoutGuess(out.readout, at, j)
            : topK > 1
              ? guessWithTop(out.logits!, offset, c.vocabSize, banned, j, topK)
              : guessAt(out.logits!, offset, c.vocabSize, banned, j),
        );
      }
      const logits = out.logits;
      let chosen: Commit[] = policy.choose({
        block: { tokens: [...block], masked: [...masked], replyStart: fixed.length, start: blockStart },
        guesses,
        history: [...history],
        eosTokenId: c.eosTokenId,
        ...(logits !== undefined
          ? { logitsAt: (j: number) => logits.subarray((blockStart + j) * c.vocabSize, (blockStart + j + 1) * c.vocabSize) }
          : {}),
      });
      history.push(guesses);
      if (chosen.length === 0) chosen = [mostConfident(guesses)!];
      committedPerStep.push(chosen.length);
      for (const g of chosen) {
        if (!masked[g.index]) throw new Error(`policy chose position ${g.index}, which is not masked`);
        block[g.index] = g.token;
        masked[g.index] = false;
      }
      const replyPart = block.slice(fixed.length);
      let contiguous = reply.length;
      let eos = -1;
      for (let j = 0; j < replyPart.length && !masked[fixed.length + j]; j++) {
        if (eos < 0 && replyPart[j] === c.eosTokenId) eos = contiguous;
        contiguous++;
      }
      const all = [...reply, ...replyPart];
      const steps = committedPerStep.length;
      if (eos >= 0 && eos < options.maxTokens) return { tokens: all.slice(0, eos), reason: "stop", steps, committedPerStep };
      if (contiguous >= options.maxTokens) {
        return { tokens: all.slice(0, options.maxTokens), reason: "length", steps, committedPerStep };
      }
      if (!masked.includes(true)) {
        reply.push(...replyPart);
        if (blockStart + length >= c.maxPositions) return { tokens: reply, reason: "length", steps, committedPerStep };
        blockStart += c.blockSize;
        break;
      }
    }
  }
}
