import type * as ort from "onnxruntime-node";
import { BatchBuilder } from "../decoder/batch.js";
import type { Lane, LaneRunner } from "../decoder/fair-runner.js";
import type { ForwardFetch, ForwardInputs } from "../decoder/forward.js";
import { DeviceSequenceKV } from "../decoder/device-kv.js";
import { createKVCache, type KVCache, SequenceKV } from "../decoder/kv-cache.js";
import { KVStorePool } from "../decoder/kv-pool.js";
import { InvalidRequest, ModelFailure } from "../core/engine-errors.js";
import type { ScoreInput, ScoreOutput } from "../core/model-engine.js";
import { LOGITS_AT } from "../onnx/onnx-head.js";
import { handOver, isWorkerSession } from "../onnx/onnx-worker-session.js";
import { copiedPast, devicePast, PastScratch, readoutInputs, repeatedPast, sharedPast, type ReadoutPast } from "./score-batch.js";
import { planReadoutForwards } from "./score-plan.js";
import { ScoreTimer } from "./score-timing.js";
import type { ModelText } from "../prompt/model-text.js";
import type { DecodeModel } from "../decoder/sequence.js";
import type { EngineMetrics } from "../core/metrics.js";
import { fewestTokens, refuseIfCannotFit } from "../prompt/text-bound.js";
import { canceled } from "../core/slots.js";

/**
 * What a Score readout needs of a loaded mask model (an engine/runtime.ts ModelRuntime is one):
 * its shape, its one runner shared fairly with generation, its text work and session, and the
 * Score limits.
 */
export interface ScoreModel {
  /** Label in metrics and messages. */
  name: string;
  decode: DecodeModel;
  runner: LaneRunner;
  model: { maxTokenBytes: number; text: Pick<ModelText, "scoreTokens">; session: ort.InferenceSession };
  /** Most tokens of model work one Score request may need. */
  maxScoreWorkTokens: number;
  /** Most tokens of one forward of a Score request: the prefix and longer rows are prefilled in chunks of it. */
  maxScoreRowTokens: number;
  /** Most prompt tokens per prefill forward, whole blocks. */
  prefillChunk: number;
  metrics: EngineMetrics | undefined;
}

/** Floats a readout forward may allocate (logits + mask + past copies), about 64 MB. */
const FORWARD_BUDGET = 16 * 1024 * 1024;

/**
 * Row tokens of one forward of a decision: the time slice a decision holds the model for before
 * the fair runner may give it to another request; at most the engine's row cap too
 * (TESSERA_MAX_DECISION_ROW_TOKENS). A longer row is cut: its complete blocks are prefilled in
 * chunks first, and only its last block with the answer span is read out.
 */
const FORWARD_ROW_TOKENS = 1024;

interface Read {
  suffix: number;
  label: number;
  /** Position of the slot within the row's tokens. */
  at: number;
  token: number;
}

interface ReadoutRow {
  tokens: number[];
  reads: Read[];
}

/** One suffix's readout rows, all continuing `base`; the first `head` tokens of base go into a cache of its own first. */
interface SuffixRows {
  base: number[];
  rows: Map<string, ReadoutRow>;
  head: number;
}

/** A row per (filled part, span length) of the labels: `base`, the filled tokens, masks to the span's end. */
function suffixRows(suffix: number, base: number[], labels: readonly number[][], maskTokenId: number): SuffixRows {
  const rows = new Map<string, ReadoutRow>();
  labels.forEach((ids, j) => {
    for (let k = 0; k < ids.length; k++) {
      const key = `${ids.length}|${ids.slice(0, k).join(",")}`;
      let row = rows.get(key);
      if (row === undefined) {
        const masks = new Array<number>(ids.length - k).fill(maskTokenId);
        row = { tokens: [...base, ...ids.slice(0, k), ...masks], reads: [] };
        rows.set(key, row);
      }
      row.reads.push({ suffix, label: j, at: base.length + k, token: ids[k]! });
    }
  });
  return { base, rows, head: 0 };
}

const invalid = (message: string) => new InvalidRequest(message);

/**
 * The decision readout (docs/architecture.md §6). The prefix's complete blocks are computed once; then
 * each suffix is a row of its own — the prefix's tail, the suffix, one `<|mask|>` answer
 * slot — and batched forwards give the logits of every suffix's labels at its slot: rows of
 * similar length share a forward, so that short rows are not padded to the longest
 * (planReadoutForwards; usually two to five forwards for 16 questions of 20 to 90 tokens).
 *
 * Each row holds exactly the tokens of encoding prefix + suffix in one piece (the prompt the
 * model was trained on; see tokenizeScorePrompts, which encodes the prefix only once) and
 * only the complete blocks that every row shares token for token with the prefix are reused,
 * so the readout equals a full recomputation of each prompt. Every row is a batch row of its
 * own, its tokens right after the shared past: then a row's logits are the same to the last
 * bit whatever other rows share its forward. (Rows laid end to end in one batch row, each
 * masked off from the others, would skip the padding and the per-row copies of the past, but
 * the attention sums then come out in another order and answers moved by about 1e-6 as
 * questions were added or removed.)
 *
 * A row longer than one forward may be (a `choice` of 128 options is about 1,800 tokens) is
 * not refused: its complete blocks before the answer span are prefilled over a cache of its
 * own (the state's past, then the question's blocks), in forwards of at most the row cap,
 * as the state is, and its rows continue that cache. So is a question with several rows
 * (multi-token labels), whose rows then share its blocks instead of each reading them again.
 * Block-causal attention makes that exact: no token of those blocks sees anything after them.
 * Only the model's context limits a question's length.
 *
 * Multi-token labels use the chain rule, filled left to right with masks after:
 * log P(t1..tm) = Σ_k log p(t_k | prompt, t1..t(k-1), <|mask|> × (m-k+1)), reading slot k.
 * The answer span keeps its full length m, masked where not yet filled, as a block-diffusion
 * model denoises it; each (filled part, m) row is computed once and shared by the labels
 * that need it, in the same batched forwards. With any multi-token label in a suffix,
 * that suffix's values are log-probabilities (single-token labels included: log-softmax at
 * the one-mask slot), so they compare on one scale.
 */
export async function scoreSuffixes(
  engine: ScoreModel,
  input: ScoreInput,
  signal?: AbortSignal,
  timer = new ScoreTimer(),
  /** Whose work its forwards are to the fair runner (decision-share.ts: the client's); default: this request's own. */
  lane: Lane = {},
): Promise<ScoreOutput> {
  const { blockSize, maxPositions, maskTokenId, vocabSize: V, kvShape } = engine.decode;
  const shift = engine.decode.logitsShift ?? 0;
  if (input.suffixes.length === 0) throw invalid("at least one suffix is required");

  // Bounds that need no tokenizing: the state alone cannot pass the context, and the work of
  // the whole request (every row reads at least its question) cannot pass the cap.
  const bytesPerToken = engine.model.maxTokenBytes;
  const prefixBytes = Buffer.byteLength(input.prefix);
  refuseIfCannotFit("the state", prefixBytes, bytesPerToken, maxPositions, engine.name);
  const maxWork = engine.maxScoreWorkTokens;
  const leastPerSuffix = input.suffixes.map((suffix) => fewestTokens(Buffer.byteLength(suffix.text), bytesPerToken));
  const leastWork = leastPerSuffix.reduce((sum, n) => sum + n, fewestTokens(prefixBytes, bytesPerToken));
  if (leastWork > maxWork) throw tooMuchWork(`at least ${leastWork}`, maxWork);
  input.suffixes.forEach((suffix, i) => {
    // The state, the question and one token of answer slot must fit the context.
    const least = fewestTokens(prefixBytes + Buffer.byteLength(suffix.text), bytesPerToken) + 1;
    if (least > maxPositions) throw tooLong(i, `at least ${least}`, maxPositions, engine.name);
  });

  const labelList = [...new Set(input.suffixes.flatMap((s) => s.labels))];
  const {
    prefixIds,
    prompts,
    labelIds: labelTokens,
  } = await timer.time("tokenizeMs", () =>
    engine.model.text.scoreTokens(
      input.prefix,
      input.suffixes.map((s) => s.text),
      labelList,
    ),
  );
  let shared = Math.floor(prefixIds.length / blockSize) * blockSize;
  for (const prompt of prompts) shared = Math.min(shared, Math.floor(prompt.common / blockSize) * blockSize);

  const maxRow = engine.maxScoreRowTokens;
  const rowLimit = Math.min(FORWARD_ROW_TOKENS, maxRow);
  const labelIds = new Map<string, number[]>(labelList.map((label, i) => [label, labelTokens[i]!]));
  const plans: SuffixRows[] = [];
  const singleOnly: boolean[] = [];
  input.suffixes.forEach((suffix, i) => {
    if (suffix.labels.length === 0) throw invalid(`suffixes[${i}] has no labels`);
    const prompt = prompts[i]!;
    const length = prompt.common + prompt.rest.length;
    const base = [...prefixIds.slice(shared, prompt.common), ...prompt.rest];
    const labels = suffix.labels.map((label, j) => {
      const ids = labelIds.get(label)!;
      if (ids.length === 0) throw invalid(`suffixes[${i}].labels[${j}] is empty`);
      return ids;
    });
    singleOnly.push(labels.every((ids) => ids.length === 1));
    const longest = Math.max(...labels.map((ids) => ids.length));
    if (length + longest > maxPositions) {
      throw tooLong(i, String(length + longest), maxPositions, engine.name);
    }
    if (base.length - shift < 0) throw invalid(`suffixes[${i}]: nothing before the answer slot to predict it from`);
    plans.push(suffixRows(i, base, labels, maskTokenId));
  });
  let work = shared;
  for (const plan of plans) {
    // The row's complete blocks before its answer span go into a cache of the suffix's own,
    // in forwards of whole blocks, when the row is longer than one forward may be or when
    // several rows (multi-token labels) would each read them again.
    const rows = [...plan.rows.values()];
    const longestRow = Math.max(...rows.map((r) => r.tokens.length));
    const head = Math.max(0, Math.floor((shared + plan.base.length - shift) / blockSize) * blockSize - shared);
    if (longestRow > rowLimit || (rows.length > 1 && head > 0)) plan.head = head;
    work += plan.head + rows.reduce((sum, r) => sum + r.tokens.length - plan.head, 0);
  }
  if (work > maxWork) throw tooMuchWork(String(work), maxWork);
  const suffixTokens = prompts.map((p) => Math.max(1, p.common + p.rest.length - prefixIds.length + 1));
  const inputTokens = prefixIds.length + suffixTokens.reduce((sum, n) => sum + n, 0);
  if (input.countOnly === true) {
    return { results: suffixTokens.map((n) => ({ logits: [], suffixTokens: n })), prefixTokens: prefixIds.length, inputTokens };
  }
  const chunk = Math.max(blockSize, Math.floor(Math.min(engine.prefillChunk, maxRow) / blockSize) * blockSize);
  const builder = new BatchBuilder(kvShape, blockSize, engine.decode.padTokenId);
  const run = (inputs: ForwardInputs, fetch: ForwardFetch) =>
    timer.forward(fetch.present ? "prefill" : "rows", inputs, engine.model.session, () =>
      runModel(engine, () => engine.runner.run(inputs, fetch, lane)),
    );

  /**
   * Appends `tokens` (whole blocks, from a block's start) to `kv` in forwards of at most `chunk`
   * tokens. A cache on the device keeps its key/values there: the past returned then has no
   * host layers, and the readout forwards gather its rows on the device (devicePast).
   */
  const prefill = async (kv: KVCache, tokens: readonly number[]): Promise<ReadoutPast> => {
    for (let done = 0; done < tokens.length; done += chunk) {
      if (signal?.aborted) throw canceled();
      const part = tokens.slice(done, done + chunk);
      const inputs = builder.build([{ kv, tokens: part }]);
      const out = await run(inputs, { present: true, output: "none" });
      engine.metrics?.forwardPasses.inc({ model: engine.name, phase: "prefill" });
      timer.timeSync("kvCopyMs", () => kv.append(out.present!, 0, inputs.past + inputs.seq, inputs.past, part.length));
      out.release?.();
    }
    return { layers: kv instanceof SequenceKV ? kv.layersOfLength() : [], length: kv.length };
  };

  const values = input.suffixes.map((s) => new Array<number>(s.labels.length).fill(0));
  /** Every row's reads from batched forwards over `past`, the key/values of `kv` (each row's tokens right after it). */
  const readRows = async (rows: ReadoutRow[], past: ReadoutPast, kv: KVCache): Promise<void> => {
    if (rows.length === 0) return;
    // A narrowed head (onnx-head-at.ts) returns the logits of the answer slots only.
    const narrowHead = engine.model.session.inputNames.includes(LOGITS_AT);
    const slotsPerRow = Math.max(...rows.map((row) => new Set(row.reads.map((read) => read.at)).size));
    const batches = planReadoutForwards(rows, past.length, (seq) => maxRows(seq, past.length, engine, narrowHead ? slotsPerRow : seq));
    // On a worker-thread session the worker writes the past's rows itself, from one shared copy;
    // on this thread they are copied into the scratch kept for the engine.
    const onDevice = kv instanceof DeviceSequenceKV;
    const onWorker = !onDevice && isWorkerSession(engine.model.session);
    const rowFloats = kvShape.heads * past.length * kvShape.headDim;
    const scratch = onWorker || onDevice ? undefined : scratchOf(engine);
    const buffers = scratch?.take(kvShape.layers, Math.max(...batches.map((b) => b.length)) * rowFloats);
    const sharedPool = onWorker ? sharedPoolOf(engine) : undefined;
    const rowsPast = sharedPool !== undefined ? timer.timeSync("kvCopyMs", () => sharedPast(past, kvShape, sharedPool)) : past;
    const batchedPast = onDevice ? devicePast(kv) : onWorker ? repeatedPast : copiedPast(buffers);
    try {
      for (const batch of batches) {
        if (signal?.aborted) throw canceled();
        const inputs = timer.timeSync("kvCopyMs", () =>
          readoutInputs(batch, rowsPast, kvShape, blockSize, engine.decode.padTokenId, batchedPast),
        );
        // With a logits shift (contract v2) the slot's prediction is the row before it.
        const slots = narrowHead ? answerSlots(batch, inputs.seq, shift) : undefined;
        if (slots !== undefined) inputs.logitsAt = slots.logitsAt;
        // built for this forward only
        if (onWorker) for (const data of [inputs.inputIds, inputs.positionIds, inputs.attentionMask]) handOver(data);
        const out = await run(inputs, { present: false, output: "logits" });
        engine.metrics?.forwardPasses.inc({ model: engine.name, phase: "score" });
        const logits = out.logits!;
        timer.timeSync("readoutMs", () =>
          batch.forEach((row, b) => {
            for (const read of row.reads) {
              const offset = (slots === undefined ? b * inputs.seq + read.at - shift : slots.indexOf(b, read.at - shift)) * V;
              const logit = logits[offset + read.token]!;
              values[read.suffix]![read.label]! += singleOnly[read.suffix] ? logit : logit - logSumExp(logits, offset, V);
            }
          }),
        );
      }
    } finally {
      if (buffers !== undefined) scratch?.release();
      if (sharedPool !== undefined) sharedPool.give(rowsPast.layers);
    }
  };

  // Admission is the caller's: a decision slot and the client's lane (decision-share.ts), not a
  // generation slot, so decisions never hold the slots a chat needs.
  // The state's complete blocks, once for every question. A cache on the device holds device
  // memory until it is disposed, whatever ends the request.
  const stateKV = createKVCache(engine.decode, Math.max(shared, 1));
  try {
    const statePast = await prefill(stateKV, prefixIds.slice(0, shared));
    await readRows(
      plans.filter((p) => p.head === 0).flatMap((p) => [...p.rows.values()]),
      statePast,
      stateKV,
    );
    // A question with a head of its own: the state's past, its head in chunks, then its rows.
    for (const plan of plans) {
      if (plan.head === 0) continue;
      const kv = createKVCache(engine.decode, shared + plan.head);
      try {
        if (kv instanceof SequenceKV) timer.timeSync("kvCopyMs", () => kv.append(statePast.layers, 0, shared, 0, shared));
        else await kv.appendCache(stateKV as DeviceSequenceKV);
        const past = await prefill(kv, plan.base.slice(0, plan.head));
        const rows = [...plan.rows.values()].map((row) => ({
          tokens: row.tokens.slice(plan.head),
          reads: row.reads.map((read) => ({ ...read, at: read.at - plan.head })),
        }));
        await readRows(rows, past, kv);
      } finally {
        kv.dispose();
      }
    }
  } finally {
    stateKV.dispose();
  }

  const results = input.suffixes.map((_, i) => ({ logits: values[i]!, suffixTokens: suffixTokens[i]! }));
  timer.done();
  return { results, prefixTokens: prefixIds.length, inputTokens };
}

/**
 * The positions a readout forward's head computes (onnx-head-at.ts): each row's answer slots,
 * padded to the row with the most by repeating its first; and where each lands in the
 * `[B, K, V]` logits.
 */
function answerSlots(rows: readonly ReadoutRow[], seq: number, shift: number) {
  const perRowSlots = rows.map((row) => [...new Set(row.reads.map((read) => read.at - shift))]);
  const perRow = Math.max(...perRowSlots.map((slots) => slots.length));
  const indices = new BigInt64Array(rows.length * perRow);
  perRowSlots.forEach((slots, b) => {
    for (let k = 0; k < perRow; k++) indices[b * perRow + k] = BigInt(b * seq + (slots[k] ?? slots[0]!));
  });
  return {
    logitsAt: { indices, perRow },
    indexOf: (b: number, position: number) => b * perRow + perRowSlots[b]!.indexOf(position),
  };
}

const scratches = new WeakMap<ScoreModel, PastScratch>();
/** Per engine: the shared memory its decisions' pasts are copied into for the worker (sharedPast). */
const sharedPools = new WeakMap<ScoreModel, KVStorePool>();

function sharedPoolOf(engine: ScoreModel): KVStorePool {
  let pool = sharedPools.get(engine);
  if (pool === undefined) {
    // Two: a state's past, and a question's own head continuing it.
    pool = new KVStorePool(2, true);
    sharedPools.set(engine, pool);
  }
  return pool;
}

function scratchOf(engine: ScoreModel): PastScratch {
  let scratch = scratches.get(engine);
  if (scratch === undefined) {
    scratch = new PastScratch();
    scratches.set(engine, scratch);
  }
  return scratch;
}

async function runModel<T>(engine: ScoreModel, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new ModelFailure(`model "${engine.name}" failed on this request: ${message}`);
  }
}

/**
 * Most rows of `seq` tokens one readout forward may hold within FORWARD_BUDGET and
 * FORWARD_ROW_TOKENS, each with the logits of `logitRows` positions.
 */
function maxRows(seq: number, past: number, engine: ScoreModel, logitRows: number): number {
  const { vocabSize: V, kvShape } = engine.decode;
  const kvPerRow = 2 * kvShape.layers * kvShape.heads * kvShape.headDim * past;
  const byMemory = Math.floor(FORWARD_BUDGET / (logitRows * V + seq * (past + seq) + kvPerRow));
  return Math.max(1, Math.min(byMemory, Math.floor(Math.min(FORWARD_ROW_TOKENS, engine.maxScoreRowTokens) / seq)));
}

/** The state and one question do not fit the model's context. */
function tooLong(suffix: number, tokens: string, context: number, model: string): InvalidRequest {
  return invalid(
    `prompt too long: the state and suffixes[${suffix}] need ${tokens} tokens with the answer slot; ` +
      `the context of model "${model}" is ${context} tokens`,
  );
}

/** The request would cost more model work than one request may (TESSERA_MAX_DECISION_WORK_TOKENS). */
function tooMuchWork(work: string, limit: number): InvalidRequest {
  return invalid(
    `this request needs ${work} tokens of model work (the state once, then one row per question: its tail of the state, ` +
      `the question and the answer slot); one request may use at most ${limit} (TESSERA_MAX_DECISION_WORK_TOKENS). ` +
      "Ask fewer questions, with fewer or shorter options, or split the request.",
  );
}

function logSumExp(logits: Float32Array, offset: number, vocab: number): number {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) max = Math.max(max, logits[offset + v]!);
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(logits[offset + v]! - max);
  return max + Math.log(sum);
}
