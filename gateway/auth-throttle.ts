import { Code, ConnectError } from "@connectrpc/connect";
import { RateLimitedSchema } from "../gen/tessera/accounting/v1/accounting_pb.js";

export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 30;
/** Addresses tracked at once; the table starts over when full (an attacker spread over more gains a fresh budget, no more). */
const MAX_ADDRESSES = 50_000;

export interface AuthThrottleOptions {
  /** Failed authentications an address may make per minute, in bursts of as many. 0: never throttled. */
  failuresPerMinute?: number;
  clock?: () => number;
}

/**
 * Throttles key guessing per client address: a token bucket of `failuresPerMinute` failed
 * authentications, refilled at that rate. While an address's bucket is empty, its requests
 * whose key is not already known (the gate's principal cache) are refused with 429 and
 * `retry-after` before the key is looked up; a key that authenticated recently is never
 * checked against the bucket, so valid clients behind the same address are not slowed.
 */
export function createAuthThrottle(options: AuthThrottleOptions = {}) {
  const perMinute = options.failuresPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE;
  const clock = options.clock ?? Date.now;
  const msPerToken = perMinute > 0 ? 60_000 / perMinute : 0;
  /** Per address: tokens left at `at` (ms). Full buckets are not kept. */
  const buckets = new Map<string, { tokens: number; at: number }>();

  function tokensOf(address: string, now: number): number {
    const bucket = buckets.get(address);
    if (bucket === undefined) return perMinute;
    const tokens = Math.min(perMinute, bucket.tokens + (now - bucket.at) / msPerToken);
    if (tokens >= perMinute) buckets.delete(address);
    return tokens;
  }

  return {
    /** Throws 429 (RateLimited, retry-after) when `address` has no failed authentication left. */
    check(address: string | undefined): void {
      if (perMinute <= 0 || address === undefined) return;
      const now = clock();
      const tokens = tokensOf(address, now);
      if (tokens >= 1) return;
      const retryAfterSeconds = Math.max(1, Math.ceil(((1 - tokens) * msPerToken) / 1000));
      throw new ConnectError(
        `Too many failed authentications from this address: at most ${perMinute} per minute. Retry in ${retryAfterSeconds} s.`,
        Code.ResourceExhausted,
        undefined,
        [{ desc: RateLimitedSchema, value: { limit: perMinute, retryAfterSeconds } }],
      );
    },
    /** Counts one failed authentication of `address`. */
    failed(address: string | undefined): void {
      if (perMinute <= 0 || address === undefined) return;
      const now = clock();
      const tokens = tokensOf(address, now);
      if (!buckets.has(address) && buckets.size >= MAX_ADDRESSES) buckets.clear();
      buckets.set(address, { tokens: Math.max(0, tokens - 1), at: now });
    },
  };
}

export type AuthThrottle = ReturnType<typeof createAuthThrottle>;
