/** What an inference worker announces about itself, repeatedly, while it is alive. */
export interface WorkerHeartbeat {
  /** Identifies the worker process. */
  id: string;
  /** The worker's Connect base URL; empty for a worker inside this process. */
  address: string;
  /** Serving ids of the models the worker has loaded. */
  models: string[];
  slotsTotal: number;
  slotsFree: number;
}

/** A worker as the directory last heard from it. */
export interface LiveWorker extends WorkerHeartbeat {
  lastSeenUnixMs: number;
}

/**
 * Who serves what right now. The embedded implementation keeps heartbeats in memory; the
 * NATS one (distributed mode) is fed by a subject every worker publishes on. Nothing above
 * this interface knows which one it talks to.
 */
export interface WorkerDirectory {
  /** Records a heartbeat (the worker's own process calls this; in NATS mode it publishes). */
  publish(heartbeat: WorkerHeartbeat): void;
  /** A worker leaving on purpose (shutdown): it is gone at once, not after its heartbeat expires. */
  withdraw(workerId: string): void;
  /** The workers heard from within the time to live, least loaded first. */
  live(): LiveWorker[];
  close(): Promise<void>;
}

/** Most free slots first; then fewest busy; then by id so the order is stable. */
export function byLeastLoaded(a: WorkerHeartbeat, b: WorkerHeartbeat): number {
  return b.slotsFree - a.slotsFree || a.slotsTotal - a.slotsFree - (b.slotsTotal - b.slotsFree) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
