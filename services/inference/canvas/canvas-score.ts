/**
 * Score (the decision readout) on a canvas model (contract v3): docs/model-contract.md,
 * "Decisions on a canvas model". The state is encoded once; each question continues a copy of
 * its cache; each label is read from the denoiser's first step on fixed noise canvases after
 * the question (canvas-readout.ts), every question's reads batched into shared forwards.
 *
 * The values are log-probabilities: log p̄(label) where p̄ is the probability of the label's
 * token at canvas position 0, averaged over the noise canvases. A label of several tokens is
 * read by the chain rule through the encoder: log p̄(t1 | prompt) + log p̄(t2 | prompt t1) + …,
 * each factor the first canvas position after the prompt with the label's earlier tokens
 * encoded onto it. Softmax over a question's labels of these values is p̄ normalised over the
 * labels offered, as for mask models (whose values differ from these by a constant per question).
 *
 * Admitted as a mask model's decisions are (decision-share.ts): a decision slot or a place in
 * the wait queue, never a generation slot; one client's decisions take turns forward by
 * forward (canvas-lane.ts). Counting (`countOnly`) takes neither.
 */
import type { ScoreInput, ScoreOutput } from "../core/model-engine.js";
import { tokenizeScorePrompts } from "../prompt/score-tokens.js";
import { copyCache, emptyCache, type RowCache } from "../decoder/canvas/canvas-kv.js";
import { DECISION_DRAWS, FirstTokenReadout } from "../decoder/canvas/canvas-readout.js";
import { Cancelled, InvalidRequest, ModelFailure, ShuttingDown } from "../core/engine-errors.js";
import { canceled } from "../core/slots.js";
import { inLane } from "./canvas-lane.js";
import { fewestTokens, refuseIfCannotFit } from "../prompt/text-bound.js";
import type { CanvasEngine } from "./canvas-service.js";

export interface CanvasScoreLimits {
  /** Most tokens of model work one request may need (TESSERA_MAX_DECISION_WORK_TOKENS). */
  maxWorkTokens: number;
  /** Most tokens of one forward (TESSERA_MAX_DECISION_ROW_TOKENS): encoder chunks, canvases per denoiser forward. */
  maxRowTokens: number;
}

/** One prompt to read at the first canvas position: a question, or a question and the first tokens of some labels. */
interface LabelRow {
  /** Label tokens encoded after the question (the chain rule's condition). */
  prefix: number[];
  reads: { label: number; token: number }[];
}

const invalid = (message: string) => new InvalidRequest(message);

export async function canvasScore(
  engine: CanvasEngine,
  input: ScoreInput,
  limits: CanvasScoreLimits,
  signal?: AbortSignal,
): Promise<ScoreOutput> {
  const { model } = engine;
  const { config, tokenizer } = model;
  const C = config.canvasLength;
  // A question's prompt and the canvas after it must fit the positions, as for a reply.
  const context = config.maxPositions - C;
  const canvasWork = DECISION_DRAWS * C;
  if (input.suffixes.length === 0) throw invalid("at least one suffix is required");

  // Bounds before any tokenizing: the state alone, each question with the state, the whole request's work.
  const bytesPerToken = model.maxTokenBytes;
  const prefixBytes = Buffer.byteLength(input.prefix);
  refuseIfCannotFit("the state", prefixBytes, bytesPerToken, context, engine.name);
  const leastWork = input.suffixes.reduce(
    (sum, s) => sum + fewestTokens(Buffer.byteLength(s.text), bytesPerToken) + canvasWork,
    fewestTokens(prefixBytes, bytesPerToken),
  );
  if (leastWork > limits.maxWorkTokens) throw tooMuchWork(`at least ${leastWork}`, limits.maxWorkTokens, C);
  input.suffixes.forEach((suffix, i) => {
    const least = fewestTokens(prefixBytes + Buffer.byteLength(suffix.text), bytesPerToken);
    if (least > context) throw tooLong(i, `at least ${least}`, context, engine.name);
  });

  const { prefixIds, prompts } = tokenizeScorePrompts(
    tokenizer,
    input.prefix,
    input.suffixes.map((s) => s.text),
  );
  const labelIds = new Map<string, number[]>();
  for (const label of new Set(input.suffixes.flatMap((s) => s.labels))) labelIds.set(label, tokenizer.encode(label));
  // The state's tokens every question's prompt starts with: encoded once.
  const shared = Math.min(prefixIds.length, ...prompts.map((p) => p.common));

  const plans = input.suffixes.map((suffix, i) => {
    if (suffix.labels.length === 0) throw invalid(`suffixes[${i}] has no labels`);
    const prompt = prompts[i]!;
    const length = prompt.common + prompt.rest.length;
    if (length === 0) throw invalid(`suffixes[${i}]: nothing before the answer to predict it from`);
    const rows = new Map<string, LabelRow>();
    suffix.labels.forEach((label, j) => {
      const ids = labelIds.get(label)!;
      if (ids.length === 0) throw invalid(`suffixes[${i}].labels[${j}] is empty`);
      if (length + ids.length - 1 > context) throw tooLong(i, String(length + ids.length - 1), context, engine.name);
      ids.forEach((token, k) => {
        const key = ids.slice(0, k).join(",");
        let row = rows.get(key);
        if (row === undefined) {
          row = { prefix: ids.slice(0, k), reads: [] };
          rows.set(key, row);
        }
        row.reads.push({ label: j, token });
      });
    });
    return { question: [...prefixIds.slice(shared, prompt.common), ...prompt.rest], rows: [...rows.values()] };
  });
  let work = shared;
  for (const plan of plans) work += plan.question.length + plan.rows.reduce((sum, r) => sum + r.prefix.length + canvasWork, 0);
  if (work > limits.maxWorkTokens) throw tooMuchWork(String(work), limits.maxWorkTokens, C);

  const suffixTokens = prompts.map((p) => Math.max(1, p.common + p.rest.length - prefixIds.length + 1));
  const inputTokens = prefixIds.length + suffixTokens.reduce((sum, n) => sum + n, 0);
  if (input.countOnly === true) {
    return { results: suffixTokens.map((n) => ({ logits: [], suffixTokens: n })), prefixTokens: prefixIds.length, inputTokens };
  }

  if (engine.closed) throw new ShuttingDown(`model "${engine.name}" is shutting down`);
  // A decision slot (not a generation slot) and its client's lane, as on a mask model (decision-share.ts).
  return engine.decisions.run(input.client, signal, async (lane) => {
    const values = input.suffixes.map((s) => new Array<number>(s.labels.length).fill(0));
    const chunk = Math.max(1, limits.maxRowTokens);
    const labels = { model: engine.name };
    const encode = async (cache: RowCache, ids: readonly number[]) => {
      for (let done = 0; done < ids.length; done += chunk) {
        if (signal?.aborted) throw canceled();
        await inLane(lane, () => engine.decoder.encode(cache, ids.slice(done, done + chunk)));
        engine.metrics?.forwardPasses.inc({ ...labels, phase: "prefill" });
      }
      return cache;
    };
    const readout = new FirstTokenReadout(model, {
      maxForwardTokens: limits.maxRowTokens,
      signal,
      onForward: () => engine.metrics?.forwardPasses.inc({ ...labels, phase: "score" }),
    });
    await runModel(engine, async () => {
      const state = await encode(emptyCache(config.layers), prefixIds.slice(0, shared));
      // Questions of one length one after another: their reads can share forwards (canvas-readout.ts).
      const order = plans.map((_, i) => i).sort((a, b) => plans[a]!.question.length - plans[b]!.question.length);
      for (const i of order) {
        const plan = plans[i]!;
        const question = await encode(copyCache(state), plan.question);
        for (const row of plan.rows) {
          const cache = row.prefix.length === 0 ? question : await encode(copyCache(question), row.prefix);
          await inLane(lane, () =>
            readout.add({
              cache,
              tokens: row.reads.map((r) => r.token),
              done: (p) => {
                row.reads.forEach((r, k) => {
                  values[i]![r.label]! += Math.log(p[k]!);
                });
              },
            }),
          );
        }
      }
      await inLane(lane, () => readout.flush());
    });
    return {
      results: input.suffixes.map((_, i) => ({ logits: values[i]!, suffixTokens: suffixTokens[i]! })),
      prefixTokens: prefixIds.length,
      inputTokens,
    };
  });
}

async function runModel(engine: CanvasEngine, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (err instanceof Cancelled || err instanceof InvalidRequest) throw err;
    const message = err instanceof Error ? err.message : String(err);
    throw new ModelFailure(`model "${engine.name}" failed on this request: ${message}`);
  }
}

/** The state and one question do not fit the model's context (its positions less one canvas). */
function tooLong(suffix: number, tokens: string, context: number, model: string): InvalidRequest {
  return invalid(
    `prompt too long: the state and suffixes[${suffix}] need ${tokens} tokens before the answer's canvas; ` +
      `the context of model "${model}" is ${context} tokens`,
  );
}

/** The request would cost more model work than one request may (TESSERA_MAX_DECISION_WORK_TOKENS). */
function tooMuchWork(work: string, limit: number, canvas: number): InvalidRequest {
  return invalid(
    `this request needs ${work} tokens of model work (the state once, then per question its tokens and ` +
      `${DECISION_DRAWS} denoising canvases of ${canvas} per label position read); one request may use at most ${limit} ` +
      "(TESSERA_MAX_DECISION_WORK_TOKENS). Ask fewer questions, with fewer or shorter options, or split the request.",
  );
}
