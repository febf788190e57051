import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { LiveWorkers } from "../heartbeats/live-workers.js";
import type { WorkerDirectory, WorkerHeartbeat } from "../heartbeats/types.js";

export const HEARTBEAT_SUBJECT = "tessera.workers.heartbeat";
export const WITHDRAW_SUBJECT = "tessera.workers.withdraw";

export interface NatsWorkerDirectoryOptions {
  ttlMs?: number;
  clock?: () => number;
}

/**
 * The distributed mode's directory: every worker publishes its heartbeat on a NATS subject
 * and every process that routes requests (gateway, decision, registry) subscribes. A worker
 * whose heartbeats stop — killed, or cut off from NATS — drops out after the time to live.
 */
export function createNatsWorkerDirectory(nc: NatsConnection, options: NatsWorkerDirectoryOptions = {}): WorkerDirectory {
  const workers = new LiveWorkers(options.ttlMs, options.clock);

  const subscriptions: Subscription[] = [
    nc.subscribe(HEARTBEAT_SUBJECT, {
      callback: (err, msg) => {
        if (err) return;
        const heartbeat = parseHeartbeat(msg.string());
        if (heartbeat) workers.record(heartbeat);
      },
    }),
    nc.subscribe(WITHDRAW_SUBJECT, {
      callback: (err, msg) => {
        if (!err) workers.remove(msg.string());
      },
    }),
  ];

  return {
    publish(heartbeat: WorkerHeartbeat) {
      // Also recorded locally, so a worker sees itself before its first message comes back.
      workers.record(heartbeat);
      if (!nc.isClosed()) nc.publish(HEARTBEAT_SUBJECT, JSON.stringify(heartbeat));
    },
    withdraw(workerId: string) {
      workers.remove(workerId);
      if (!nc.isClosed()) nc.publish(WITHDRAW_SUBJECT, workerId);
    },
    live() {
      return workers.live();
    },
    async close() {
      for (const sub of subscriptions) sub.unsubscribe();
      workers.clear();
    },
  };
}

function parseHeartbeat(text: string): WorkerHeartbeat | null {
  try {
    const value = JSON.parse(text) as Partial<WorkerHeartbeat>;
    if (
      typeof value.id !== "string" ||
      typeof value.address !== "string" ||
      !Array.isArray(value.models) ||
      !value.models.every((m) => typeof m === "string") ||
      typeof value.slotsTotal !== "number" ||
      typeof value.slotsFree !== "number"
    ) {
      return null;
    }
    return {
      id: value.id,
      address: value.address,
      models: value.models,
      slotsTotal: value.slotsTotal,
      slotsFree: value.slotsFree,
    };
  } catch {
    return null;
  }
}
