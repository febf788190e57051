import { Code } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { RateLimitedSchema } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createMemoryBucket, createMemoryStore, type KvBucket } from "../../lib/store/index.js";
import { takeRequest, takeRequestNow } from "./rate-limit.js";
import type { RateWindow } from "./records.js";
import { failure, startHarness, T0, type Harness } from "../../test/helpers/accounting-harness.js";

describe("takeRequest (fixed one-minute windows)", () => {
  const bucket = () => createMemoryStore().bucket<RateWindow>("rates");

  it("admits `limit` requests per clock minute and resets at the minute", async () => {
    const b = bucket();
    const late = T0 + 59_000; // 10:00:59
    expect(await takeRequest(b, "k", 3, late)).toEqual({ admitted: true, remaining: 2, resetSeconds: 1 });
    expect(await takeRequest(b, "k", 3, late + 500)).toEqual({ admitted: true, remaining: 1, resetSeconds: 1 });
    expect(await takeRequest(b, "k", 3, late + 999)).toEqual({ admitted: true, remaining: 0, resetSeconds: 1 });
    expect(await takeRequest(b, "k", 3, late + 999)).toEqual({ admitted: false, remaining: 0, resetSeconds: 1 });
    // 10:01:00.000 is a new window.
    expect(await takeRequest(b, "k", 3, T0 + 60_000)).toEqual({ admitted: true, remaining: 2, resetSeconds: 60 });
  });

  it("rounds the time to the window's end up to whole seconds", async () => {
    const b = bucket();
    expect((await takeRequest(b, "k", 1, T0)).resetSeconds).toBe(60);
    expect((await takeRequest(b, "k", 1, T0 + 100)).resetSeconds).toBe(60);
    expect((await takeRequest(b, "k", 1, T0 + 58_001)).resetSeconds).toBe(2);
  });

  it("counts keys separately", async () => {
    const b = bucket();
    expect((await takeRequest(b, "a", 1, T0)).admitted).toBe(true);
    expect((await takeRequest(b, "a", 1, T0)).admitted).toBe(false);
    expect((await takeRequest(b, "b", 1, T0)).admitted).toBe(true);
  });

  it("decides at once on a memory store, and says when a refused request's window ends", () => {
    const b = createMemoryBucket<RateWindow>("rates");
    expect(takeRequestNow(b, "k", 2, T0 + 1_000)).toEqual({ admitted: true, remaining: 1, resetSeconds: 59 });
    expect(takeRequestNow(b, "k", 2, T0 + 1_000)).toEqual({ admitted: true, remaining: 0, resetSeconds: 59 });
    expect(takeRequestNow(b, "k", 2, T0 + 30_500)).toEqual({ admitted: false, remaining: 0, resetSeconds: 30 });
    // Refused in a window stamped ahead (another replica's clock): its end is what counts.
    takeRequestNow(b, "ahead", 1, T0 + 60_000);
    expect(takeRequestNow(b, "ahead", 1, T0 + 59_000)).toEqual({ admitted: false, remaining: 0, resetSeconds: 61 });
  });

  it("decides the same on a store without updateNow (compare-and-set)", async () => {
    const memory = bucket();
    const b: KvBucket<RateWindow> = {
      name: memory.name,
      get: (k) => memory.get(k),
      create: (k, v) => memory.create(k, v),
      update: (k, v, r) => memory.update(k, v, r),
      put: (k, v) => memory.put(k, v),
      delete: (k, r) => memory.delete(k, r),
      keys: (p) => memory.keys(p),
    };
    expect(await takeRequest(b, "k", 2, T0)).toEqual({ admitted: true, remaining: 1, resetSeconds: 60 });
    expect(await takeRequest(b, "k", 2, T0 + 100)).toEqual({ admitted: true, remaining: 0, resetSeconds: 60 });
    expect(await takeRequest(b, "k", 2, T0 + 200)).toEqual({ admitted: false, remaining: 0, resetSeconds: 60 });
    const concurrent = await Promise.all(Array.from({ length: 30 }, () => takeRequest(b, "c", 10, T0)));
    expect(concurrent.filter((d) => d.admitted)).toHaveLength(10);
  });

  it("keeps counting in a window stamped ahead by another replica's clock", async () => {
    const b = bucket();
    await takeRequest(b, "k", 2, T0 + 60_000);
    await takeRequest(b, "k", 2, T0 + 60_000);
    expect((await takeRequest(b, "k", 2, T0 + 59_000)).admitted).toBe(false);
  });
});

describe("Admit: per-key rate limit", () => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  it("refuses with ResourceExhausted and a RateLimited detail, then admits in the next minute", async () => {
    h = await startHarness();
    const { key } = await h.client.createKey({ limits: { requestsPerMinute: 2 } });
    const keyId = key!.keyId;
    h.setTime(T0 + 45_250);
    expect(await h.client.admit({ keyId, requestId: "1" })).toMatchObject({ remainingRequests: 1, resetSeconds: 15 });
    expect(await h.client.admit({ keyId, requestId: "2" })).toMatchObject({ remainingRequests: 0, resetSeconds: 15 });
    const err = await failure(h.client.admit({ keyId, requestId: "3" }));
    expect(err.code).toBe(Code.ResourceExhausted);
    const [detail] = err.findDetails(RateLimitedSchema);
    expect(detail).toMatchObject({ retryAfterSeconds: 15, limit: 2 });
    h.setTime(T0 + 60_000);
    expect(await h.client.admit({ keyId, requestId: "4" })).toMatchObject({ remainingRequests: 1, resetSeconds: 60 });
  });

  it("uses the service default for keys without their own limit, and follows SetLimits", async () => {
    h = await startHarness({ defaultRequestsPerMinute: 1 });
    const { key } = await h.client.createKey({});
    const keyId = key!.keyId;
    await h.client.admit({ keyId });
    expect((await failure(h.client.admit({ keyId }))).code).toBe(Code.ResourceExhausted);
    await h.client.setLimits({ keyId, limits: { requestsPerMinute: 3 } });
    await h.client.admit({ keyId });
    await h.client.admit({ keyId });
    expect((await failure(h.client.admit({ keyId }))).findDetails(RateLimitedSchema)[0]!.limit).toBe(3);
  });

  it("does not limit when the default is 0 and the key has no limit", async () => {
    h = await startHarness({ defaultRequestsPerMinute: 0 });
    const { key } = await h.client.createKey({});
    for (let i = 0; i < 50; i++) await h.client.admit({ keyId: key!.keyId });
    expect((await h.client.admit({ keyId: key!.keyId })).remainingRequests).toBe(0xffffffff);
  });

  for (const rates of ["memory", "lmdb"] as const) {
    it(`admits exactly 60 of 200 parallel requests on a key limited to 60/min (${rates} rate store)`, async () => {
      h = await startHarness({ rates });
      const { key } = await h.client.createKey({ limits: { requestsPerMinute: 60 } });
      h.setTime(T0 + 10_000);
      const results = await Promise.allSettled(
        Array.from({ length: 200 }, (_, i) => h.client.admit({ keyId: key!.keyId, requestId: `r${i}` })),
      );
      const admitted = results.filter((r) => r.status === "fulfilled");
      expect(admitted).toHaveLength(60);
      const remaining = admitted.map((r) => (r as PromiseFulfilledResult<{ remainingRequests: number }>).value.remainingRequests);
      expect(new Set(remaining).size).toBe(60); // each admitted request saw its own count
      for (const r of results) {
        if (r.status === "rejected") {
          const err = await failure(Promise.reject(r.reason));
          expect(err.code).toBe(Code.ResourceExhausted);
          expect(err.findDetails(RateLimitedSchema)[0]).toMatchObject({ limit: 60, retryAfterSeconds: 50 });
        }
      }
    });
  }
});
