import { byLeastLoaded, type LiveWorker, type WorkerHeartbeat } from "./types.js";

export const DEFAULT_HEARTBEAT_TTL_MS = 5_000;

/** The workers heard from within the time to live, as every worker directory keeps them. */
export class LiveWorkers {
  private readonly workers = new Map<string, LiveWorker>();

  constructor(
    private readonly ttlMs = DEFAULT_HEARTBEAT_TTL_MS,
    private readonly clock: () => number = Date.now,
  ) {}

  record(heartbeat: WorkerHeartbeat): void {
    this.workers.set(heartbeat.id, { ...heartbeat, models: [...heartbeat.models], lastSeenUnixMs: this.clock() });
  }

  remove(workerId: string): void {
    this.workers.delete(workerId);
  }

  /** Live workers, least loaded first; the expired ones are forgotten on the way. */
  live(): LiveWorker[] {
    const now = this.clock();
    const alive: LiveWorker[] = [];
    for (const [id, worker] of this.workers) {
      if (now - worker.lastSeenUnixMs > this.ttlMs) this.workers.delete(id);
      else alive.push(worker);
    }
    return alive.sort(byLeastLoaded);
  }

  clear(): void {
    this.workers.clear();
  }
}
