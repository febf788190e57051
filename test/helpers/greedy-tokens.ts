import { StopMatcher } from "../../services/inference/decoder/reply-text.js";
import type { ModelRuntime } from "../../services/inference/engine/runtime.js";
import type { GenerationEvent } from "../../services/inference/engine/scheduler.js";

/** A reply's tokens through the engine's scheduler, with the model's own policy and no stop sequence. */
export async function greedyTokens(engine: ModelRuntime, prompt: number[], maxTokens: number): Promise<number[]> {
  const stream = await engine.scheduler.generate({
    prompt,
    maxTokens,
    policy: engine.policy,
    stops: new StopMatcher([]),
    decode: engine.model.tokenizer.decode,
  });
  let last: GenerationEvent | undefined;
  for await (const e of stream) last = e;
  if (last?.type !== "finished") throw new Error("no finished event");
  return last.finished.tokens;
}
