import { MAX_GENERATE_STOP_CHARS, MAX_GENERATE_STOP_SEQUENCES, MAX_TOP_LOGPROBS } from "../../../lib/text-limits.js";
import type { GenerationRequest } from "./model-engine.js";
import { InvalidRequest } from "./engine-errors.js";

/** Refuses more stop sequences, or longer ones, than a reply takes (lib/text-limits.ts); any kind of model. */
export function checkStopSequences(stop: readonly string[]): void {
  if (stop.length > MAX_GENERATE_STOP_SEQUENCES) throw new InvalidRequest(`stop: at most ${MAX_GENERATE_STOP_SEQUENCES} sequences`);
  if (stop.some((s) => s.length > MAX_GENERATE_STOP_CHARS)) {
    throw new InvalidRequest(`stop: each sequence at most ${MAX_GENERATE_STOP_CHARS} characters`);
  }
}

/** The logprobs a reply reports (top alternatives capped at MAX_TOP_LOGPROBS), or undefined when not asked. */
export function logprobsAsked(options: GenerationRequest["options"]): { top: number } | undefined {
  return options?.logprobs === true ? { top: Math.min(options.topLogprobs, MAX_TOP_LOGPROBS) } : undefined;
}
