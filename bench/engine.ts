// The inference engine: forward passes per generated token and tokens/s for 1 request and
// 8 concurrent; aggregate tokens/s at 8 against 1 (goal >= 1.5x); engine overhead per
// decode step against a bare session.run on the same shapes, in the same run (goal <= 15%);
// the prefill of a ~1,000-token chat prompt with the output head skipped (onnx-head.ts)
// against the same prefill computing it, alternated in one run.
//
//   npx tsx bench/engine.ts [model-dir …]     (default: the tiny test model, and
//                                              models/tessera-bd-small when it exists)
//   BENCH_THREADS=N                            ONNX Runtime intra-op threads (default: its own)
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as ort from "onnxruntime-node";
import { StopMatcher } from "../services/inference/decoder/reply-text.js";
import { createModelRuntime, type ModelRuntime } from "../services/inference/engine/runtime.js";
import { loadModelDir, type ModelDir } from "../services/inference/engine/model-dir.js";
import { openSession } from "../services/inference/onnx/onnx-session.js";
import { type RecordedForward, recordingRunner } from "../test/helpers/recording-runner.js";
import { TINY_MODEL_DIR } from "../test/helpers/tiny-model.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BUNDLED_DIR = path.join(ROOT, "models", "tessera-bd-small");
const CONCURRENT = 8;
/** ONNX Runtime intra-op threads (0: its default, one per physical core). */
const THREADS = Number(process.env.BENCH_THREADS ?? 0);
const REPEATS = 5;
const PREFILL_PROMPT_TOKENS = 1000;

interface Workload {
  prompts: string[];
  maxTokens: number;
}

/** Replies of the random tiny model to this prompt run to max_tokens (no end of turn). */
const TINY: Workload = { prompts: ["2+2=?"], maxTokens: 256 };
const BUNDLED: Workload = {
  prompts: [
    "What does the word serendipity mean?",
    "Use the word garden in a sentence.",
    "What are synonyms and opposites of happy?",
    "Is a dog a kind of animal?",
    "What does the word harbor mean?",
    "Use the word quiet in a sentence.",
    "What is the opposite of generous?",
    "Is an oak a kind of tree?",
  ],
  maxTokens: 256,
};

interface Run {
  tokens: number;
  seconds: number;
  /** Forwards run (a batched forward counts once). */
  forwards: number;
  /** Sum over sequences of the forwards each took part in. */
  sequenceForwards: number;
  recorded: RecordedForward[];
}

function chatPrompt(model: ModelDir, content: string): number[] {
  return model.tokenizer.encode(
    model.renderChat({
      messages: [{ role: "user", content }],
      tools: [],
      tool_choice: "auto",
      forced_tool: "",
      response_format: "",
      json_schema: "",
      enable_thinking: false,
      add_generation_prompt: true,
    }),
  );
}

async function generateOne(
  engine: ModelRuntime,
  model: ModelDir,
  prompt: number[],
  maxTokens: number,
): Promise<{ tokens: number; forwards: number }> {
  const stream = await engine.scheduler.generate({
    prompt,
    maxTokens,
    policy: engine.policy,
    stops: new StopMatcher([]),
    decode: model.tokenizer.decode,
  });
  for await (const e of stream) if (e.type === "finished") return { tokens: e.finished.completionTokens, forwards: e.forwardPasses };
  throw new Error("no finished event");
}

async function generateAll(
  engine: ModelRuntime,
  model: ModelDir,
  prompts: string[],
  maxTokens: number,
  recorded: () => RecordedForward[],
): Promise<Run> {
  const before = recorded().length;
  const started = performance.now();
  const results = await Promise.all(prompts.map((p) => generateOne(engine, model, chatPrompt(model, p), maxTokens)));
  const seconds = (performance.now() - started) / 1000;
  const runs = recorded().slice(before);
  return {
    tokens: results.reduce((s, r) => s + r.tokens, 0),
    seconds,
    forwards: runs.length,
    sequenceForwards: results.reduce((s, r) => s + r.forwards, 0),
    recorded: runs,
  };
}

/**
 * The same forwards as `recorded` (same shapes, the contract's outputs: logits, and the
 * present key/values where the engine fetched them), straight on a session of the model
 * file as it is, without the engine's in-graph readout or conditional head (so a prompt's
 * prefill computes the head here, not in the engine).
 */
async function bareReplay(model: ModelDir, bare: ort.InferenceSession, recorded: RecordedForward[]): Promise<number> {
  const c = model.config;
  const cache = new Map<string, Record<string, ort.Tensor>>();
  const feedsFor = (f: RecordedForward) => {
    const key = `${f.batch}/${f.seq}/${f.past}`;
    let feeds = cache.get(key);
    if (feeds === undefined) {
      const { batch: B, seq: S, past: P } = f;
      feeds = {
        input_ids: new ort.Tensor("int64", new BigInt64Array(B * S).fill(BigInt(c.padTokenId)), [B, S]),
        position_ids: new ort.Tensor(
          "int64",
          BigInt64Array.from({ length: B * S }, (_, i) => BigInt(P + (i % S))),
          [B, S],
        ),
        attention_mask: new ort.Tensor("float32", new Float32Array(B * S * (P + S)), [B, 1, S, P + S]),
      };
      for (let l = 0; l < c.numLayers; l++) {
        for (const kind of ["key", "value"]) {
          feeds[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", new Float32Array(B * c.numKvHeads * P * c.headDim), [
            B,
            c.numKvHeads,
            P,
            c.headDim,
          ]);
        }
      }
      cache.set(key, feeds);
    }
    return feeds;
  };
  for (const f of recorded) feedsFor(f);
  const all = bare.outputNames;
  const logitsOnly = ["logits"];
  const started = performance.now();
  for (const f of recorded) await bare.run(feedsFor(f), f.fetch.present ? all : logitsOnly);
  return (performance.now() - started) / 1000;
}

// The fastest of the repeats: on a shared machine the other processes only ever add time.
const best = (xs: number[]) => Math.min(...xs);

interface PrefillRow {
  model: string;
  promptTokens: number;
  /** Prompt tokens in complete blocks: what the prefill forwards compute. */
  prefilledTokens: number;
  forwards: number;
  /** Wall ms of the prefill forwards, best of REPEATS: the head skipped, and computed. */
  skippedMs: number;
  computedMs: number;
}

/**
 * The prefill of a chat prompt of about PREFILL_PROMPT_TOKENS tokens (or what the context
 * allows), through the engine, with the output head skipped as the engine does it and with
 * it computed (the prefill asks for the readout, as it did before onnx-head.ts), alternated.
 */
async function benchPrefill(
  engine: ModelRuntime,
  model: ModelDir,
  recorded: () => RecordedForward[],
  setHead: (on: boolean) => void,
): Promise<PrefillRow> {
  const c = model.config;
  const target = Math.min(PREFILL_PROMPT_TOKENS, c.maxPositions - 2 * c.blockSize);
  const sentence = "The customer reports that the nightly export has failed three times this week, each time after about thirty minutes. ";
  let content = sentence;
  let prompt = chatPrompt(model, content);
  while (prompt.length < target) {
    content += sentence;
    prompt = chatPrompt(model, content);
  }
  const times = { skipped: [] as number[], computed: [] as number[] };
  let forwards = 0;
  for (let i = 0; i < REPEATS + 1; i++) {
    for (const head of i % 2 === 0 ? [false, true] : [true, false]) {
      setHead(head);
      const before = recorded().length;
      await generateOne(engine, model, prompt, 1);
      const prefills = recorded()
        .slice(before)
        .filter((f) => f.fetch.output === "none");
      forwards = prefills.length;
      if (i > 0) (head ? times.computed : times.skipped).push(prefills.reduce((sum, f) => sum + f.ms, 0)); // the first round warms up
    }
  }
  setHead(false);
  return {
    model: path.basename(model.dir),
    promptTokens: prompt.length,
    prefilledTokens: Math.floor(prompt.length / c.blockSize) * c.blockSize,
    forwards,
    skippedMs: best(times.skipped),
    computedMs: best(times.computed),
  };
}

interface Row {
  model: string;
  load: string;
  tokens: number;
  tokensPerSecond: number;
  forwardsPerToken: number;
  sequenceForwardsPerToken: number;
  stepMs: number;
  /** Time inside session.run during the engine's own run (the rest is the engine's JS). */
  runMs: number;
  bareStepMs: number;
  overhead: number;
}

async function benchModel(dir: string, workload: Workload): Promise<{ rows: Row[]; prefill: PrefillRow }> {
  const model = await loadModelDir(dir, { intraOpThreads: THREADS });
  const { session: bare } = await openSession(path.join(dir, model.config.onnxFile), { intraOpThreads: THREADS });
  let recorded: RecordedForward[] = [];
  let headOnPrefill = false;
  const engine = createModelRuntime({
    name: path.basename(dir),
    servingIds: [path.basename(dir)],
    model,
    slots: CONCURRENT,
    queue: CONCURRENT,
    wrapRunner: (inner) => {
      const r = recordingRunner({
        run: (inputs, fetch) => inner.run(inputs, headOnPrefill && fetch.output === "none" ? { ...fetch, output: "readout" } : fetch),
      });
      recorded = r.forwards;
      return r;
    },
  });
  const rows: Row[] = [];
  let prefill: PrefillRow;
  try {
    // Warm-up: first runs allocate ONNX Runtime's arenas.
    await generateAll(engine, model, workload.prompts.slice(0, 1), 64, () => recorded);

    for (const [load, prompts] of [
      ["1 request", [workload.prompts[0]!]],
      [`${CONCURRENT} concurrent`, Array.from({ length: CONCURRENT }, (_, i) => workload.prompts[i % workload.prompts.length]!)],
    ] as const) {
      const runs: Run[] = [];
      const bareTimes: number[] = [];
      for (let i = 0; i < REPEATS; i++) {
        const run = await generateAll(engine, model, [...prompts], workload.maxTokens, () => recorded);
        runs.push(run);
        bareTimes.push(await bareReplay(model, bare, run.recorded));
      }
      const seconds = best(runs.map((r) => r.seconds));
      const bareSeconds = best(bareTimes);
      const run = runs[0]!;
      rows.push({
        model: path.basename(dir),
        load,
        tokens: run.tokens,
        tokensPerSecond: run.tokens / seconds,
        forwardsPerToken: run.forwards / run.tokens,
        sequenceForwardsPerToken: run.sequenceForwards / run.tokens,
        stepMs: (seconds * 1000) / run.forwards,
        runMs: best(runs.map((r) => r.recorded.reduce((sum, f) => sum + f.ms, 0) / r.forwards)),
        bareStepMs: (bareSeconds * 1000) / run.forwards,
        overhead: seconds / bareSeconds - 1,
      });
    }
    prefill = await benchPrefill(
      engine,
      model,
      () => recorded,
      (on) => (headOnPrefill = on),
    );
  } finally {
    await engine.close();
    await bare.release();
  }
  return { rows, prefill };
}

function print(rows: Row[]): void {
  const header = [
    "model",
    "load",
    "tokens",
    "tokens/s",
    "forwards/token",
    "seq. forwards/token",
    "ms/step",
    "of which run",
    "bare ms/step",
    "overhead",
  ];
  const lines = rows.map((r) => [
    r.model,
    r.load,
    String(r.tokens),
    r.tokensPerSecond.toFixed(1),
    r.forwardsPerToken.toFixed(3),
    r.sequenceForwardsPerToken.toFixed(3),
    r.stepMs.toFixed(2),
    r.runMs.toFixed(2),
    r.bareStepMs.toFixed(2),
    `${(r.overhead * 100).toFixed(1)}%`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  console.log(fmt(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const l of lines) console.log(fmt(l));
  const models = [...new Set(rows.map((r) => r.model))];
  for (const m of models) {
    const [one, many] = rows.filter((r) => r.model === m);
    if (one && many) {
      const ratio = many.tokensPerSecond / one.tokensPerSecond;
      console.log(`${m}: aggregate tokens/s at ${CONCURRENT} concurrent / 1 request = ${ratio.toFixed(2)}x (goal >= 1.5x)`);
    }
  }
}

export async function run(dirs: string[] = []): Promise<void> {
  const targets: [string, Workload][] =
    dirs.length > 0
      ? dirs.map((d) => [path.resolve(d), path.resolve(d) === TINY_MODEL_DIR ? TINY : BUNDLED])
      : [
          [TINY_MODEL_DIR, TINY],
          ...(existsSync(path.join(BUNDLED_DIR, "config.json")) ? ([[BUNDLED_DIR, BUNDLED]] as [string, Workload][]) : []),
        ];
  const rows: Row[] = [];
  const prefills: PrefillRow[] = [];
  for (const [dir, workload] of targets) {
    const result = await benchModel(dir, workload);
    rows.push(...result.rows);
    prefills.push(result.prefill);
  }
  const threads = THREADS > 0 ? String(THREADS) : "ONNX Runtime's default";
  console.log(`threshold 0.9, best of ${REPEATS} runs each, ONNX Runtime on the CPU, intra-op threads: ${threads} (BENCH_THREADS)`);
  console.log("ms/step: engine wall time per forward; of which run: inside session.run in that run;");
  console.log(
    "bare ms/step: the same forwards replayed on a plain session of the model file (logits fetched); overhead = ms/step / bare - 1",
  );
  print(rows);
  for (const p of prefills) {
    console.log(
      `${p.model}: prefill of a ${p.promptTokens}-token chat prompt (${p.prefilledTokens} tokens in ${p.forwards} forward(s)), best of ${REPEATS}: ` +
        `${p.skippedMs.toFixed(1)} ms with the output head skipped, ${p.computedMs.toFixed(1)} ms computing it (${((p.skippedMs / p.computedMs - 1) * 100).toFixed(0)}%)`,
    );
  }
  if (!existsSync(path.join(BUNDLED_DIR, "config.json")) && dirs.length === 0) {
    console.log(`(${path.relative(ROOT, BUNDLED_DIR)} not present: bundled model skipped)`);
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run(process.argv.slice(2));
}
