import type { WorkerDirectory, WorkerHeartbeat } from "./types.js";

export const DEFAULT_HEARTBEAT_INTERVAL_MS = 1_000;

export interface HeartbeatPublisher {
  /** Publishes a heartbeat now (e.g. right after the slots changed). */
  beat(): void;
  /** Stops beating and withdraws the worker. */
  stop(): void;
}

/**
 * Publishes `sample()` into the directory now and then every interval, until stopped.
 * The interval timer does not keep the process alive.
 */
export function startHeartbeats(
  directory: WorkerDirectory,
  sample: () => WorkerHeartbeat,
  intervalMs: number = DEFAULT_HEARTBEAT_INTERVAL_MS,
): HeartbeatPublisher {
  let workerId = sample().id;
  const beat = () => {
    const heartbeat = sample();
    workerId = heartbeat.id;
    directory.publish(heartbeat);
  };
  beat();
  const timer = setInterval(beat, intervalMs);
  timer.unref();
  return {
    beat,
    stop() {
      clearInterval(timer);
      directory.withdraw(workerId);
    },
  };
}
