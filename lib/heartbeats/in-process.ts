import { LiveWorkers } from "./live-workers.js";
import type { WorkerDirectory, WorkerHeartbeat } from "./types.js";

export interface InProcessWorkerDirectoryOptions {
  /** A worker not heard from for this long is no longer live. */
  ttlMs?: number;
  clock?: () => number;
}

/** The embedded mode's directory: heartbeats of the workers of this process, in memory. */
export function createInProcessWorkerDirectory(options: InProcessWorkerDirectoryOptions = {}): WorkerDirectory {
  const workers = new LiveWorkers(options.ttlMs, options.clock);
  return {
    publish(heartbeat: WorkerHeartbeat) {
      workers.record(heartbeat);
    },
    withdraw(workerId: string) {
      workers.remove(workerId);
    },
    live() {
      return workers.live();
    },
    async close() {
      workers.clear();
    },
  };
}
