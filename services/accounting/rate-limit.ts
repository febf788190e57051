import { casUpdate, type KvBucket, type UpdatesNow } from "../../lib/store/index.js";
import type { RateWindow } from "./records.js";

export const WINDOW_MS = 60_000;

/** The bucket the rate windows live in. */
export const RATE_BUCKET = "accounting_rates";

export interface RateDecision {
  admitted: boolean;
  /** Requests left in this window after this one (0 when refused). */
  remaining: number;
  /** Whole seconds until the window ends (at least 1). */
  resetSeconds: number;
}

/**
 * The per-minute limiter, chosen at wiring time: `sharedRateLimiter` on any store,
 * `localRateLimiter` on a process-local bucket. Nothing above it knows which.
 */
export interface RateLimiter {
  /** Counts one request of `key` in its window: a decision at once where the store allows it, else a promise. */
  take(key: string, limit: number, now: number): RateDecision | Promise<RateDecision>;
}

/** On any store (NATS KV, LMDB): compare-and-set, so replicas sharing the bucket never admit more than the limit. */
export function sharedRateLimiter(bucket: KvBucket<RateWindow>): RateLimiter {
  return { take: (key, limit, now) => takeRequest(bucket, key, limit, now) };
}

/** On a process-local bucket (embedded mode): the read-modify-write at once, nothing awaited on the request path. */
export function localRateLimiter(bucket: UpdatesNow<RateWindow>): RateLimiter {
  return { take: (key, limit, now) => takeRequestNow(bucket, key, limit, now) };
}

/**
 * Fixed one-minute windows aligned to the clock minute (UTC :00 seconds): a key may make
 * `limit` requests between hh:mm:00 and hh:mm:59.999, and the count starts again at the next
 * minute. Chosen over a sliding window because it is one small record per key, one
 * compare-and-set per request, and what `retry-after` says is exact (the window's end).
 * The price is the usual one: a burst straddling a minute boundary can reach 2x the limit
 * within 60 seconds, though never more than `limit` within one clock minute.
 *
 * The count goes up by compare-and-set only when the request is admitted, so concurrent
 * callers (in this process or in other replicas) never admit more than `limit` per window.
 */
export function takeRequest(bucket: KvBucket<RateWindow>, key: string, limit: number, now: number): Promise<RateDecision> {
  const count = new Count(now, limit);
  return casUpdate(bucket, key, count.take).then(() => count.decision());
}

/**
 * `takeRequest` on a process-local store, without waiting: the read-modify-write is done at
 * once (nothing else can run between its read and its write) and without copying the window,
 * since this runs on every request.
 */
export function takeRequestNow(bucket: UpdatesNow<RateWindow>, key: string, limit: number, now: number): RateDecision {
  const count = new Count(now, limit);
  bucket.replaceNow(key, count.take);
  return count.decision();
}

/** One request counted in its window: `take` is the read-modify-write, `decision` what it decided. */
class Count {
  private readonly windowStart: number;
  /** The window the request was counted in (a later one than ours if a replica's clock runs ahead). */
  private start: number;
  private admitted = false;
  private count = 0;

  constructor(
    private readonly now: number,
    private readonly limit: number,
  ) {
    this.windowStart = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    this.start = this.windowStart;
  }

  /** The window after this request, or undefined when it is refused (the window stays as it is). */
  readonly take = (current: Readonly<RateWindow> | undefined): RateWindow | undefined => {
    // A window stamped later than ours comes from a replica whose clock runs ahead:
    // count in it rather than reset it.
    const same = current !== undefined && current.w >= this.windowStart;
    this.start = same ? current.w : this.windowStart;
    this.count = same ? current.n : 0;
    this.admitted = this.count < this.limit;
    if (!this.admitted) return undefined;
    this.count += 1;
    return { w: this.start, n: this.count };
  };

  decision(): RateDecision {
    const resetSeconds = Math.max(1, Math.ceil((this.start + WINDOW_MS - this.now) / 1000));
    return { admitted: this.admitted, remaining: this.admitted ? this.limit - this.count : 0, resetSeconds };
  }
}
