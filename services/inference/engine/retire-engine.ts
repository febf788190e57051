import type { ModelEngine } from "../core/model-engine.js";

/** How often a retired engine is checked for running work. */
const IDLE_POLL_MS = 250;
/** Idle checks in a row before it closes: a request that took the engine just before it was retired is admitted by then. */
const IDLE_CHECKS = 3;

/**
 * Closes an engine no serving id routes to any more (a model replaced or removed while serving)
 * once the replies and decisions it was running have finished: none is cut. Resolves true once
 * closed, false where `stopNow()` (the pool closing) ended the wait first: the pool closes it then.
 */
export async function closeWhenIdle(engine: ModelEngine, stopNow: () => boolean): Promise<boolean> {
  let idleChecks = 0;
  while (idleChecks < IDLE_CHECKS) {
    await new Promise((r) => setTimeout(r, IDLE_POLL_MS));
    if (stopNow()) return false;
    const { total, free } = engine.info().slots;
    idleChecks = free === total ? idleChecks + 1 : 0;
  }
  await engine.close();
  return true;
}
