import type { Lane } from "../decoder/fair-runner.js";
import { SlotPool } from "../core/slots.js";

/**
 * The decisions of one model: admitted as generations are (as many at once as the model has
 * slots, then a bounded wait queue, then 529 with retry-after), and their forwards shared by
 * client, not by request: every decision of one client (the gateway's account id) runs in one
 * lane of the fair runner, so four decisions from one key get the model time one would, and
 * the generation loop keeps its share beside them. A decision without a client has a lane of
 * its own.
 */
export class DecisionShare {
  readonly slots: SlotPool;
  private readonly lanes = new Map<string, { lane: Lane; running: number }>();

  constructor(modelName: string, slots: number, queue: number) {
    this.slots = new SlotPool(modelName, slots, queue, undefined, "decision");
  }

  /** Runs one decision's work in its client's lane once a slot is free; refused Overloaded when the queue is full. */
  async run<T>(client: string | undefined, signal: AbortSignal | undefined, work: (lane: Lane, queueMs: number) => Promise<T>): Promise<T> {
    const queued = performance.now();
    await this.slots.acquire(signal);
    const started = performance.now();
    const shared = client === undefined || client === "" ? undefined : this.enter(client);
    try {
      return await work(shared?.lane ?? {}, started - queued);
    } finally {
      if (shared !== undefined && --shared.running === 0) this.lanes.delete(client!);
      this.slots.release((performance.now() - started) / 1000);
    }
  }

  private enter(client: string): { lane: Lane; running: number } {
    let shared = this.lanes.get(client);
    if (shared === undefined) {
      shared = { lane: {}, running: 0 };
      this.lanes.set(client, shared);
    }
    shared.running++;
    return shared;
  }
}
