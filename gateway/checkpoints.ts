import { UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { GenerateResponse } from "../gen/tessera/inference/v1/inference_pb.js";
import type { SettleUsage } from "./gate.js";
import type { RequestContext } from "./route.js";

/** How often a stream in flight records what it has delivered (at most the last this-much is lost to a kill -9). */
export const CHECKPOINT_INTERVAL_MS = 1_000;

/**
 * Records a stream's delivered usage while it runs (accounting Admit `delivered`), so that if
 * the process dies before the stream settles, recovery at the next start charges what it had
 * delivered. The first change is sent at once, later ones at most every `intervalMs` (the
 * latest value when the interval is up); `stop` drops whatever is pending (the settle follows).
 */
export function createCheckpoints(send: (usage: SettleUsage) => void, intervalMs = CHECKPOINT_INTERVAL_MS) {
  let last = Number.NEGATIVE_INFINITY;
  let pending: SettleUsage | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    if (pending === undefined) return;
    last = performance.now();
    const usage = pending;
    pending = undefined;
    send(usage);
  };
  return {
    update(usage: SettleUsage): void {
      pending = usage;
      if (timer !== undefined) return;
      const wait = last + intervalMs - performance.now();
      if (wait <= 0) flush();
      else {
        timer = setTimeout(flush, wait);
        timer.unref();
      }
    },
    stop(): void {
      clearTimeout(timer);
      timer = undefined;
      pending = undefined;
    },
  };
}

/**
 * What a generation stream has delivered once `event` has been passed on: its prompt once
 * `started` went out, plus the reply tokens up to the last delta's block (docs/reliability.md).
 */
export function deliveredByGenerate(event: GenerateResponse, sofar: SettleUsage | undefined): SettleUsage | undefined {
  const e = event.event;
  if (e.case === "started") return { promptTokens: e.value.promptTokens, completionTokens: 0 };
  if (e.case === "delta") return { ...sofar, completionTokens: e.value.completionTokens };
  return sofar;
}

/**
 * What a stream has delivered, as its events pass (`deliveredOf` adds one event to the usage so
 * far), checkpointed as it grows: the one count of a stream cut short, for the gate's Connect
 * streams and the routes' SSE alike. `usage` is what the stream is charged if it ends without
 * its final usage; `stop` when it ends.
 */
export function createDeliveredUsage<M>(
  deliveredOf: (event: M, sofar: SettleUsage | undefined) => SettleUsage | undefined,
  send: (usage: SettleUsage) => void,
) {
  const checkpoints = createCheckpoints(send);
  let usage: SettleUsage | undefined;
  return {
    get usage(): SettleUsage | undefined {
      return usage;
    },
    passed(event: M): void {
      const next = deliveredOf(event, usage);
      if (next !== usage && next !== undefined) checkpoints.update(next);
      usage = next;
    },
    stop: () => checkpoints.stop(),
  };
}

export type DeliveredUsage = ReturnType<typeof createDeliveredUsage>;

/**
 * The events unchanged; what they delivered is counted and checkpointed as each is passed on (a
 * route's stream): `delivered.usage` is then the engine's own count (the last delta's
 * `completion_tokens`), what a stream that ended early is charged.
 */
export async function* checkpointed(
  events: AsyncIterable<GenerateResponse>,
  ctx: Pick<RequestContext, "checkpoint">,
  delivered: { usage: SettleUsage | undefined } = { usage: undefined },
): AsyncIterable<GenerateResponse> {
  const tracker = createDeliveredUsage(deliveredByGenerate, (usage) => ctx.checkpoint(UsageKind.TEXT, usage));
  try {
    for await (const event of events) {
      tracker.passed(event);
      delivered.usage = tracker.usage;
      yield event;
    }
  } finally {
    tracker.stop();
  }
}
