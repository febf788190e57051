import { byLeastLoaded, type LiveWorker, type WorkerDirectory, type WorkerHeartbeat } from "./types.js";

export interface InProcessWorkerDirectoryOptions {
  /** A worker not heard from for this long is no longer live. */
  ttlMs?: number;
  clock?: () => number;
}

export const DEFAULT_HEARTBEAT_TTL_MS = 5_000;

/** The embedded mode's directory: heartbeats of the workers of this process, in memory. */
export function createInProcessWorkerDirectory(options: InProcessWorkerDirectoryOptions = {}): WorkerDirectory {
  const ttlMs = options.ttlMs ?? DEFAULT_HEARTBEAT_TTL_MS;
  const clock = options.clock ?? Date.now;
  const workers = new Map<string, LiveWorker>();

  return {
    publish(heartbeat: WorkerHeartbeat) {
      workers.set(heartbeat.id, { ...heartbeat, models: [...heartbeat.models], lastSeenUnixMs: clock() });
    },
    withdraw(workerId: string) {
      workers.delete(workerId);
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
      workers.clear();
    },
  };
}
