// bench/decision.ts's report lines.
import type { DecisionPhases, EventLoopDelay } from "./phases.js";
import type { DecisionBenchResult, DecisionLatencyResult } from "./runs.js";

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
