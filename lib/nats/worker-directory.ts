import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { DEFAULT_HEARTBEAT_TTL_MS } from "../heartbeats/in-process.js";
import { byLeastLoaded, type LiveWorker, type WorkerDirectory, type WorkerHeartbeat } from "../heartbeats/types.js";

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
export function createNatsWorkerDirectory(
  nc: NatsConnection,
  options: NatsWorkerDirectoryOptions = {},
): WorkerDirectory {
  const ttlMs = options.ttlMs ?? DEFAULT_HEARTBEAT_TTL_MS;
  const clock = options.clock ?? Date.now;
  const workers = new Map<string, LiveWorker>();

  const subscriptions: Subscription[] = [
    nc.subscribe(HEARTBEAT_SUBJECT, {
      callback: (err, msg) => {
        if (err) return;
        const heartbeat = parseHeartbeat(msg.string());
        if (heartbeat) workers.set(heartbeat.id, { ...heartbeat, lastSeenUnixMs: clock() });
      },
    }),
    nc.subscribe(WITHDRAW_SUBJECT, {
      callback: (err, msg) => {
        if (!err) workers.delete(msg.string());
      },
    }),
  ];

  return {
    publish(heartbeat: WorkerHeartbeat) {
      // Also recorded locally, so a worker sees itself before its first message comes back.
      workers.set(heartbeat.id, { ...heartbeat, models: [...heartbeat.models], lastSeenUnixMs: clock() });
      if (!nc.isClosed()) nc.publish(HEARTBEAT_SUBJECT, JSON.stringify(heartbeat));
    },
    withdraw(workerId: string) {
      workers.delete(workerId);
      if (!nc.isClosed()) nc.publish(WITHDRAW_SUBJECT, workerId);
    },
    live() {
      const now = clock();
      const alive: LiveWorker[] = [];
      for (const [id, worker] of workers) {
        if (now - worker.lastSeenUnixMs > ttlMs) workers.delete(id);
        else alive.push(worker);
      }
      return alive.sort(byLeastLoaded);
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
