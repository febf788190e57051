import type { SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../logger.js";
import type { UsageSink } from "./sink.js";

export interface RetryingUsageSinkOptions {
  logger: Logger;
  /** Between retries of the events that could not be published (default 1 s). */
  retryMs?: number;
  /** Events kept for retry at most; beyond that the oldest is dropped and logged (default 100 000). */
  maxPending?: number;
}

export interface RetryingUsageSink extends UsageSink {
  /** Events waiting for a retry. */
  pending(): number;
  /** Tries to publish what is pending for up to `ms`; logs (never the key) what is still left. */
  flush(ms: number): Promise<void>;
}

/**
 * Usage must not be lost when the stream cannot take it right now (NATS restarting): an
 * event whose publish fails is kept and published again until it goes through, and the
 * caller is answered at once. Publishing is deduplicated by request id, so an event that
 * was stored although its publish timed out is not counted twice.
 */
export function retryingUsageSink(inner: UsageSink, options: RetryingUsageSinkOptions): RetryingUsageSink {
  const { logger } = options;
  const retryMs = options.retryMs ?? 1_000;
  const maxPending = options.maxPending ?? 100_000;
  const queue = new Map<string, SettleRequest>();
  let timer: NodeJS.Timeout | undefined;
  let draining: Promise<void> | undefined;

  const keyOf = (event: SettleRequest) => `${event.keyId}\u0000${event.requestId}`;

  const drain = () =>
    (draining ??= (async () => {
      try {
        for (const [key, event] of queue) {
          try {
            await inner.publish(event);
            queue.delete(key);
          } catch {
            return; // still unavailable: try again later
          }
        }
        if (queue.size === 0) logger.info("usage events published after the stream came back");
      } finally {
        draining = undefined;
        schedule();
      }
    })());

  function schedule() {
    if (queue.size === 0 || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      void drain();
    }, retryMs);
    timer.unref();
  }

  return {
    async publish(event) {
      try {
        await inner.publish(event);
      } catch (err) {
        if (queue.size >= maxPending) {
          const [oldestKey, oldest] = queue.entries().next().value as [string, SettleRequest];
          queue.delete(oldestKey);
          logger.error(
            { keyId: oldest.keyId, requestId: oldest.requestId, usage: oldest.usage },
            "usage event dropped: too many waiting for the stream",
          );
        }
        if (queue.size === 0) logger.warn({ err }, "usage stream unavailable; keeping usage events to publish later");
        queue.set(keyOf(event), event);
        schedule();
      }
    },
    pending: () => queue.size,
    async flush(ms) {
      const end = Date.now() + ms;
      while (queue.size > 0 && Date.now() < end) {
        await drain();
        if (queue.size > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(retryMs, Math.max(0, end - Date.now()))));
      }
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      for (const event of queue.values()) {
        logger.error(
          { keyId: event.keyId, requestId: event.requestId, kind: event.kind, usage: event.usage },
          "usage event not published before shutdown",
        );
      }
    },
  };
}
