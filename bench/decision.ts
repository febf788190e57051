// Decision benchmark (issue 4): 16 questions on one ~1,000-token state against 1 question on the
// same state, in one run, through the real decision service and inference engine. The state is
// read once, so the goal is that the 16 take at most 1.5x the time of the 1 (issue 22; 2x before). Then issue 5's
// latency: 4 questions on a ~300-token state (target: at most 300 ms on the 2-core machine).
// Both report where the time goes, and how long the event loop was held up.
//
// Then the document's widest question (bench/decision-wide.ts): one `choice` of 128 options,
// every third with a short description, alone and with a 16-token chat sent behind it.
//
//   npx tsx bench/decision.ts [--iterations N] [--model-dir DIR ...] [--row-tokens N] [--threads N] [--only ratio|latency|wide]
//
// --threads: ONNX Runtime's intra-op threads for the ratio (default: its own choice). The ratio
// also comes as CPU time of the whole process, which a loaded machine stretches far less
// than the wall time; with --threads 1 no thread of ONNX Runtime's spins either.
//
// Runs on the tiny test model, and on the bundled model when models/tessera-bd-small exists.
import { existsSync } from "node:fs";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { DecisionService, type DecideRequest, type Question } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { parseDecisionRequest } from "../lib/decision-types/request-json.js";
import { silentLogger } from "../lib/logger.js";
import { questionTypeOf } from "../lib/decision-types/registry.js";
import { decisionRoutes } from "../services/decision/server.js";
import { DEFAULT_CATALOG, fakeRegistry } from "../support/decision-doubles.js";
import { loadModelPool, type ModelPool } from "../services/inference/engine/model-pool.js";
import { lastWorkerRun } from "../services/inference/onnx/onnx-worker-session.js";
import { createInferenceService } from "../services/inference/service.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_MODEL_DIRS = [path.join(ROOT, "test/fixtures/tiny-model"), path.join(ROOT, "models/tessera-bd-small")];
const STATE_TOKENS = 1000;
const LATENCY_STATE_TOKENS = 300;
const LATENCY_QUESTIONS = ["urgent", "team", "mood", "escalate"];

/** Where one decision request spent its time, in ms (medians when summarised). */
export interface DecisionPhases {
  total: number;
  /**
   * CPU time of the whole process (every thread: this one, the worker, ONNX Runtime's), ms.
   * Other processes on a loaded machine stretch the wall time far more than this.
   */
  cpu: number;
  /** Tokenizer encodes: the state once, each question, the labels. */
  tokenize: number;
  /** ONNX Runtime's run of the prefill forwards (the state's complete blocks). */
  prefill: number;
  /** ONNX Runtime's run of the readout forwards (one row per question). */
  rows: number;
  /** How many readout forwards. */
  rowForwards: number;
  /** The worker writing the state's key/values once per row. */
  fill: number;
  /** Every forward's trip to the worker thread and back, feeds and outputs included. */
  transport: number;
  /** The rest of the inference service's Score: building inputs, reading the logits, RPC. */
  inferenceOther: number;
  /** The decision service: validation, rendering, the softmax, RPC. */
  decisionOther: number;
  /** Of decisionOther: the probabilities (softmax, confidence) of every answer. */
  softmax: number;
}

export interface EventLoopDelay {
  maxMs: number;
  p99Ms: number;
}

export interface DecisionBenchResult {
  model: string;
  stateTokens: number;
  inputTokens: { one: number; sixteen: number };
  medianMs: { one: number; sixteen: number };
  ratio: number;
  /** The fastest run of each: load on a shared machine only ever adds time. */
  bestMs: { one: number; sixteen: number };
  bestRatio: number;
  /** The ratio of the median CPU times (all threads). */
  cpuRatio: number;
  phases: { one: DecisionPhases; sixteen: DecisionPhases };
  eventLoop: EventLoopDelay;
  /** The process's resident memory after the runs, model loaded (MiB). */
  rssMiB: number;
}

export interface DecisionLatencyResult {
  model: string;
  stateTokens: number;
  questions: number;
  medianMs: number;
  p90Ms: number;
  bestMs: number;
  phases: DecisionPhases;
  eventLoop: EventLoopDelay;
  /** The process's resident memory after the runs, model loaded (MiB). */
  rssMiB: number;
}

const SENTENCES = [
  "The customer reports that the nightly export has failed three times this week.",
  "Each failure happens after about thirty minutes, with a timeout from the storage layer.",
  "Their compliance team needs the export before the audit that starts on Monday morning.",
  "They already reduced the date range and retried manually, without success.",
  "The account has been with us since 2019 and is on the enterprise plan.",
  "Two other tickets from the same region mention slow uploads during the same hours.",
  "The customer asks for a call with an engineer and a written incident summary.",
  "Support suggested splitting the export into smaller batches as a workaround.",
];

const QUESTIONS: Record<string, unknown> = {
  urgent: { type: "noul", instructions: "Is this ticket urgent?" },
  escalate: { type: "noul", instructions: "Should an engineer be paged?", criteria: { true: "page now", false: "next business day" } },
  team: {
    type: "choice",
    instructions: "Which team owns this?",
    criteria: { billing: null, "data platform": "exports", storage: "uploads and disks", support: null },
  },
  mood: { type: "score", instructions: "How upset is the customer?", criteria: ["calm", "concerned", "upset", "furious"] },
  churn: { type: "score", instructions: "Risk that the customer leaves?", criteria: ["low", "medium", "high"] },
  cause: { type: "choice", criteria: { network: null, storage: null, "query size": null, "client bug": null, unknown: null } },
  refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
  call: { type: "noul", instructions: "Does the customer ask for a call?" },
  region: { type: "choice", instructions: "Where is the customer?", criteria: { eu: null, us: null, apac: null } },
  severity: { type: "score", criteria: ["sev4", "sev3", "sev2", "sev1"] },
  known: { type: "noul", instructions: "Is this a known incident?" },
  plan: { type: "choice", criteria: { free: null, team: null, enterprise: null } },
  workaround: { type: "noul", instructions: "Was a workaround offered?" },
  effort: { type: "score", instructions: "Effort to resolve", criteria: ["minutes", "hours", "days", "weeks", "months"] },
  language: { type: "choice", criteria: { english: null, german: null, french: null, japanese: null } },
  followup: { type: "noul", instructions: "Is a follow-up needed?" },
};

interface Forward {
  prefill: boolean;
  wallMs: number;
  runMs: number;
  fillMs: number;
}

/** The decision and inference services over one model, instrumented phase by phase. */
export interface Rig {
  pool: ModelPool;
  inference: Client<typeof InferenceService>;
  /** One timed decision. */
  decide(req: DecideRequest): Promise<{ phases: DecisionPhases; inputTokens: number }>;
  /** A state of about `tokens` tokens of the model's tokenizer, grown sentence by sentence. */
  stateOf(tokens: number): Promise<{ state: string; tokens: number }>;
}

/** `rowTokens`: TESSERA_MAX_DECISION_ROW_TOKENS (the engine's default when unset); `threads`: ONNX Runtime's intra-op threads. */
export async function openRig(modelDir: string, rowTokens?: number, threads?: number): Promise<Rig> {
  const forwards: Forward[] = [];
  const pool = await loadModelPool({
    models: [{ servingId: "bundled", dir: modelDir }],
    ...(rowTokens === undefined ? {} : { maxScoreRowTokens: rowTokens }),
    ...(threads === undefined ? {} : { intraOpThreads: threads }),
    slots: 4,
    queue: 16,
    wrapRunner: (inner) => ({
      async run(inputs, fetch) {
        const started = performance.now();
        const out = await inner.run(inputs, fetch);
        const wallMs = performance.now() - started;
        const worker = lastWorkerRun(pool.runtimes[0]!.model.session);
        forwards.push({ prefill: fetch.present, wallMs, runMs: worker?.runMs ?? wallMs, fillMs: worker?.fillMs ?? 0 });
        return out;
      },
    }),
  });
  const engine = pool.runtimes[0]!;
  const tokenizer = engine.model.tokenizer;
  const encode = tokenizer.encode.bind(tokenizer);
  let tokenizeMs = 0;
  tokenizer.encode = (text) => {
    const started = performance.now();
    try {
      return encode(text);
    } finally {
      tokenizeMs += performance.now() - started;
    }
  };

  const logger = silentLogger();
  const inference = createClient(
    InferenceService,
    createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, workerId: "bench" }))),
  );
  // The decision service's client of the inference service, timing Score and keeping its logits.
  let scoreMs = 0;
  let scoreLogits: number[][] = [];
  const timedInference = new Proxy(inference, {
    get(target, prop, receiver) {
      if (prop !== "score") return Reflect.get(target, prop, receiver) as unknown;
      return async (...args: Parameters<typeof inference.score>) => {
        const started = performance.now();
        const res = await target.score(...args);
        scoreMs += performance.now() - started;
        scoreLogits = res.results.map((r) => r.logits);
        return res;
      };
    },
  });
  const registry = createClient(
    RegistryService,
    createRouterTransport(({ service }) => service(RegistryService, fakeRegistry(DEFAULT_CATALOG))),
  );
  const decision = createClient(
    DecisionService,
    createRouterTransport(decisionRoutes({ registry, inferenceFor: () => timedInference, logger })),
  );

  return {
    pool,
    inference,
    async decide(req) {
      forwards.length = 0;
      tokenizeMs = 0;
      scoreMs = 0;
      const started = performance.now();
      const cpuStarted = process.cpuUsage();
      const res = await decision.decide(req);
      const total = performance.now() - started;
      const cpuUsed = process.cpuUsage(cpuStarted);
      const sum = (fs: Forward[], f: (x: Forward) => number) => fs.reduce((s, x) => s + f(x), 0);
      const prefill = forwards.filter((f) => f.prefill);
      const rows = forwards.filter((f) => !f.prefill);
      const questions = req.questionList.flatMap((q) => (q.question === undefined ? [] : [q.question]));
      return {
        inputTokens: res.usage?.inputTokens ?? 0,
        phases: {
          total,
          cpu: (cpuUsed.user + cpuUsed.system) / 1000,
          tokenize: tokenizeMs,
          prefill: sum(prefill, (f) => f.runMs),
          rows: sum(rows, (f) => f.runMs),
          rowForwards: rows.length,
          fill: sum(forwards, (f) => f.fillMs),
          transport: sum(forwards, (f) => f.wallMs - f.runMs - f.fillMs),
          inferenceOther: scoreMs - tokenizeMs - sum(forwards, (f) => f.wallMs),
          decisionOther: total - scoreMs,
          softmax: softmaxMs(scoreLogits, questions),
        },
      };
    },
    async stateOf(tokens) {
      const sentences: string[] = [];
      let count = 0;
      for (let i = 0; count < tokens; i++) {
        sentences.push(`${i + 1}. ${SENTENCES[i % SENTENCES.length]}`);
        count = (await inference.countTokens({ model: "bundled", text: sentences.join("\n") })).tokens;
      }
      return { state: sentences.join("\n"), tokens: count };
    },
  };
}

/** Every answer from its logits, as the decision service computes them with each type's module (mean of 50). */
function softmaxMs(logits: number[][], questions: Question[]): number {
  const answerers = questions.map((q) => {
    const type = questionTypeOf(q.type);
    const criteria = type?.criteriaFromProto(q.criteria, [], []);
    return (l: number[]) => type?.answer(criteria, l, 1);
  });
  const started = performance.now();
  for (let r = 0; r < 50; r++) {
    logits.forEach((l, i) => {
      answerers[i]?.(l);
    });
  }
  return (performance.now() - started) / 50;
}

export function requestOf(state: string, questions: Record<string, unknown>): DecideRequest {
  const parsed = parseDecisionRequest({ model: "decisionmodel-latest", state, questions });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
  return parsed.request;
}

function pick(ids: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(ids.map((id) => [id, QUESTIONS[id]]));
}

/** Event-loop delay while `run` runs (1 ms resolution). */
async function watchEventLoop<T>(run: () => Promise<T>): Promise<{ result: T; eventLoop: EventLoopDelay }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  try {
    const result = await run();
    histogram.disable();
    return { result, eventLoop: { maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6 } };
  } finally {
    histogram.disable();
  }
}

export async function benchDecision(modelDir: string, iterations: number, threads?: number): Promise<DecisionBenchResult> {
  const rig = await openRig(modelDir, undefined, threads);
  try {
    const { state, tokens: stateTokens } = await rig.stateOf(STATE_TOKENS);
    const one = requestOf(state, pick(["urgent"]));
    const sixteen = requestOf(state, QUESTIONS);
    for (let i = 0; i < 3; i++) {
      await rig.decide(one);
      await rig.decide(sixteen);
    }
    const ones: DecisionPhases[] = [];
    const sixteens: DecisionPhases[] = [];
    let inputTokens = { one: 0, sixteen: 0 };
    // Interleaved, so drift on a shared machine affects both sides alike.
    const { eventLoop } = await watchEventLoop(async () => {
      for (let i = 0; i < iterations; i++) {
        const a = await rig.decide(one);
        const b = await rig.decide(sixteen);
        ones.push(a.phases);
        sixteens.push(b.phases);
        inputTokens = { one: a.inputTokens, sixteen: b.inputTokens };
      }
    });
    const phases = { one: medianPhases(ones), sixteen: medianPhases(sixteens) };
    const medianMs = { one: phases.one.total, sixteen: phases.sixteen.total };
    const bestMs = { one: Math.min(...ones.map((p) => p.total)), sixteen: Math.min(...sixteens.map((p) => p.total)) };
    return {
      model: path.basename(modelDir),
      stateTokens,
      inputTokens,
      medianMs,
      ratio: medianMs.sixteen / medianMs.one,
      bestMs,
      bestRatio: bestMs.sixteen / bestMs.one,
      cpuRatio: phases.sixteen.cpu / phases.one.cpu,
      phases,
      eventLoop,
      rssMiB: rssMiB(),
    };
  } finally {
    await rig.pool.close();
  }
}

export async function benchDecisionLatency(modelDir: string, iterations: number): Promise<DecisionLatencyResult> {
  const rig = await openRig(modelDir);
  try {
    const { state, tokens: stateTokens } = await rig.stateOf(LATENCY_STATE_TOKENS);
    const req = requestOf(state, pick(LATENCY_QUESTIONS));
    for (let i = 0; i < 3; i++) await rig.decide(req);
    const runs: DecisionPhases[] = [];
    const { eventLoop } = await watchEventLoop(async () => {
      for (let i = 0; i < iterations; i++) runs.push((await rig.decide(req)).phases);
    });
    const phases = medianPhases(runs);
    const totals = runs.map((r) => r.total).sort((a, b) => a - b);
    return {
      model: path.basename(modelDir),
      stateTokens,
      questions: LATENCY_QUESTIONS.length,
      medianMs: phases.total,
      p90Ms: totals[Math.min(totals.length - 1, Math.floor(totals.length * 0.9))]!,
      bestMs: totals[0]!,
      phases,
      eventLoop,
      rssMiB: rssMiB(),
    };
  } finally {
    await rig.pool.close();
  }
}

export function rssMiB(): number {
  return Math.round(process.memoryUsage().rss / 2 ** 20);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The median of each phase on its own (so the phases need not add up to the median total). */
function medianPhases(runs: DecisionPhases[]): DecisionPhases {
  const keys = Object.keys(runs[0]!) as (keyof DecisionPhases)[];
  return Object.fromEntries(keys.map((k) => [k, median(runs.map((r) => r[k]))])) as unknown as DecisionPhases;
}

function formatPhases(p: DecisionPhases): string {
  const ms = (x: number) => x.toFixed(1);
  return (
    `tokenize ${ms(p.tokenize)} · prefill ${ms(p.prefill)} · rows ${ms(p.rows)} (${p.rowForwards} forwards) · ` +
    `fill ${ms(p.fill)} · transport ${ms(p.transport)} · inference other ${ms(p.inferenceOther)} · ` +
    `decision other ${ms(p.decisionOther)} (softmax ${(p.softmax * 1000).toFixed(0)} µs)`
  );
}

function formatEventLoop(e: EventLoopDelay): string {
  return `event loop delay: max ${e.maxMs.toFixed(1)} ms, p99 ${e.p99Ms.toFixed(1)} ms`;
}

export function formatDecisionBench(r: DecisionBenchResult): string {
  return [
    `decision bench — ${r.model}: state ${r.stateTokens} tokens`,
    `  1 question:   ${r.medianMs.one.toFixed(1)} ms median, ${r.bestMs.one.toFixed(1)} ms best (${r.inputTokens.one} input tokens)`,
    `  16 questions: ${r.medianMs.sixteen.toFixed(1)} ms median, ${r.bestMs.sixteen.toFixed(1)} ms best (${r.inputTokens.sixteen} input tokens)`,
    `  ratio 16/1:   ${r.ratio.toFixed(2)}x median, ${r.bestRatio.toFixed(2)}x best (goal <= 1.5x: ${r.ratio <= 1.5 ? "met" : "NOT met"})`,
    `  CPU time, all threads (median): ${r.phases.one.cpu.toFixed(0)} ms vs ${r.phases.sixteen.cpu.toFixed(0)} ms, ratio ${r.cpuRatio.toFixed(2)}x`,
    `  phases, 1 question (median ms):   ${formatPhases(r.phases.one)}`,
    `  phases, 16 questions (median ms): ${formatPhases(r.phases.sixteen)}`,
    `  ${formatEventLoop(r.eventLoop)}; resident memory ${r.rssMiB} MiB`,
  ].join("\n");
}

export function formatDecisionLatency(r: DecisionLatencyResult): string {
  return [
    `decision latency — ${r.model}: ${r.questions} questions on a ${r.stateTokens}-token state`,
    `  ${r.medianMs.toFixed(1)} ms median, ${r.p90Ms.toFixed(1)} ms p90, ${r.bestMs.toFixed(1)} ms best (target <= 300 ms: ${r.medianMs <= 300 ? "met" : "NOT met"})`,
    `  phases (median ms): ${formatPhases(r.phases)}`,
    `  ${formatEventLoop(r.eventLoop)}; resident memory ${r.rssMiB} MiB`,
  ].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      iterations: { type: "string", default: "20" },
      "model-dir": { type: "string", multiple: true },
      "row-tokens": { type: "string" },
      threads: { type: "string" },
      only: { type: "string" },
    },
  });
  const iterations = Number(values.iterations);
  if (!Number.isInteger(iterations) || iterations < 1) throw new Error("--iterations must be a positive integer");
  const dirs = (values["model-dir"] ?? DEFAULT_MODEL_DIRS).filter((dir) => existsSync(path.join(dir, "config.json")));
  const only = values.only;
  const threads = values.threads === undefined ? undefined : Number(values.threads);
  if (threads !== undefined && (!Number.isInteger(threads) || threads < 1)) throw new Error("--threads must be a positive integer");
  if (only === undefined || only === "ratio")
    for (const dir of dirs) console.log(formatDecisionBench(await benchDecision(dir, iterations, threads)));
  if (only === undefined || only === "latency") {
    for (const dir of dirs) console.log(formatDecisionLatency(await benchDecisionLatency(dir, iterations)));
  }
  if (only !== undefined && only !== "wide") return;
  const { benchWideDecision, formatWideDecision } = await import("./decision-wide.js");
  const rowTokens = values["row-tokens"] === undefined ? undefined : Number(values["row-tokens"]);
  const wideIterations = Math.max(1, Math.ceil(iterations / 4));
  for (const dir of dirs) console.log(formatWideDecision(await benchWideDecision(dir, wideIterations, rowTokens)));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
