import { casUpdate, type KvBucket } from "../../lib/store/index.js";
import { updatesNow } from "../../lib/store/memory.js";
import type { RateWindow } from "./records.js";

export const WINDOW_MS = 60_000;

export interface RateDecision {
  admitted: boolean;
  /** Requests left in this window after this one (0 when refused). */
  remaining: number;
  /** Whole seconds until the window ends (at least 1). */
  resetSeconds: number;
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
 * A process-local store (embedded mode) does the read-modify-write at once instead: nothing
 * else can run between its read and its write, and this is on every request's path.
 */
export function takeRequest(
  bucket: KvBucket<RateWindow>,
  key: string,
  limit: number,
  now: number,
): Promise<RateDecision> {
  const windowStart = Math.floor(now / WINDOW_MS) * WINDOW_MS;
  let admitted = false;
  let count = 0;
  let start = windowStart;
  const take = (current: RateWindow | undefined): RateWindow | undefined => {
    // A window stamped later than ours comes from a replica whose clock runs ahead:
    // count in it rather than reset it.
    const same = current !== undefined && current.w >= windowStart;
    start = same ? current.w : windowStart;
    count = same ? current.n : 0;
    admitted = count < limit;
    if (!admitted) return undefined;
    count += 1;
    return { w: start, n: count };
  };
  const decision = (): RateDecision => {
    const resetSeconds = Math.max(1, Math.ceil((start + WINDOW_MS - now) / 1000));
    return { admitted, remaining: admitted ? limit - count : 0, resetSeconds };
  };
  if (!updatesNow(bucket)) return casUpdate(bucket, key, take).then(decision);
  try {
    bucket.updateNow(key, take);
  } catch (err) {
    return Promise.reject(err);
  }
  return Promise.resolve(decision());
}
