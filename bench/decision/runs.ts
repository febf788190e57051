// The two measurements of bench/decision.ts: 16 questions against 1 on a ~1,000-token state
// (the ratio, issue 22), and 4 questions on a ~300-token state (the latency, issue 5).
import path from "node:path";
import { type DecisionPhases, type EventLoopDelay, medianPhases, rssMiB, watchEventLoop } from "./phases.js";
import { pick, QUESTIONS, requestOf } from "./questions.js";
import { openRig } from "./rig.js";

const STATE_TOKENS = 1000;
const LATENCY_STATE_TOKENS = 300;
const LATENCY_QUESTIONS = ["urgent", "team", "mood", "escalate"];

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
