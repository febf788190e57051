import { Code } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { QuotaExceededSchema, RateLimitedSchema, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { failure, startHarness, T0, type Harness } from "../../test/helpers/accounting-harness.js";

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.close();
});

const TEXT = UsageKind.TEXT;
const DECISION = UsageKind.DECISION;

async function account(accountId: string) {
  return (await h.client.getAccount({ accountId })).account!;
}

describe("quotas: reservation and settlement", () => {
  it("reserves on Admit, charges exact usage on Settle and releases the rest", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 1000n } });
    const keyId = key!.keyId;
    await h.client.admit({ keyId, requestId: "a", kind: TEXT, reserveTokens: 600n });
    expect(await account(key!.accountId)).toMatchObject({ textUsedTokens: 0n, textReservedTokens: 600n });

    const err = await failure(h.client.admit({ keyId, requestId: "b", kind: TEXT, reserveTokens: 600n }));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.findDetails(QuotaExceededSchema)[0]).toMatchObject({ kind: TEXT, quotaTokens: 1000n, availableTokens: 400n });
    expect(err.findDetails(RateLimitedSchema)).toHaveLength(0);

    const settled = await h.client.settle({ keyId, requestId: "a", kind: TEXT, usage: { promptTokens: 100n, completionTokens: 50n } });
    expect(settled.alreadySettled).toBe(false);
    expect(await account(key!.accountId)).toMatchObject({ textUsedTokens: 150n, textReservedTokens: 0n });
    await h.client.admit({ keyId, requestId: "b", kind: TEXT, reserveTokens: 850n });
    expect((await failure(h.client.admit({ keyId, requestId: "c", kind: TEXT, reserveTokens: 1n }))).code).toBe(Code.ResourceExhausted);
  });

  it("refuses once the quota is used up, even a reservation of 0", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 100n } });
    const keyId = key!.keyId;
    await h.client.settle({ keyId, requestId: "x", kind: TEXT, usage: { promptTokens: 60n, completionTokens: 40n } });
    const err = await failure(h.client.admit({ keyId, requestId: "y", kind: TEXT, reserveTokens: 0n }));
    expect(err.findDetails(QuotaExceededSchema)[0]).toMatchObject({ availableTokens: 0n, quotaTokens: 100n });
    // The decision quota is separate (and unlimited here).
    await h.client.admit({ keyId, requestId: "z", kind: DECISION, reserveTokens: 10_000n });
    // Requests without a kind draw on no quota.
    await h.client.admit({ keyId });
  });

  it("keeps the decision quota on input tokens", async () => {
    const { key } = await h.client.createKey({ limits: { decisionQuotaTokens: 300n } });
    const keyId = key!.keyId;
    await h.client.admit({ keyId, requestId: "d1", kind: DECISION, reserveTokens: 300n });
    expect((await failure(h.client.admit({ keyId, requestId: "d2", kind: DECISION, reserveTokens: 1n }))).code).toBe(
      Code.ResourceExhausted,
    );
    await h.client.settle({ keyId, requestId: "d1", kind: DECISION, usage: { inputTokens: 120n, promptTokens: 999n } });
    const a = await account(key!.accountId);
    expect(a).toMatchObject({ decisionUsedTokens: 120n, decisionReservedTokens: 0n, textUsedTokens: 0n });
    await h.client.admit({ keyId, requestId: "d2", kind: DECISION, reserveTokens: 180n });
  });

  it("checks the rate limit before the quota; a quota refusal still counts as a request", async () => {
    const { key } = await h.client.createKey({ limits: { requestsPerMinute: 2, textQuotaTokens: 10n } });
    const keyId = key!.keyId;
    expect(
      (await failure(h.client.admit({ keyId, requestId: "1", kind: TEXT, reserveTokens: 11n }))).findDetails(QuotaExceededSchema),
    ).toHaveLength(1);
    await h.client.admit({ keyId, requestId: "2", kind: TEXT, reserveTokens: 5n });
    const err = await failure(h.client.admit({ keyId, requestId: "3", kind: TEXT, reserveTokens: 50n }));
    expect(err.findDetails(RateLimitedSchema)).toHaveLength(1);
    expect(err.findDetails(QuotaExceededSchema)).toHaveLength(0);
  });

  it("holds no reservation under an unlimited quota but still counts usage", async () => {
    const { key } = await h.client.createKey({});
    await h.client.admit({ keyId: key!.keyId, requestId: "u", kind: TEXT, reserveTokens: 1_000_000n });
    expect((await account(key!.accountId)).textReservedTokens).toBe(0n);
    await h.client.settle({ keyId: key!.keyId, requestId: "u", kind: TEXT, usage: { promptTokens: 7n, completionTokens: 3n } });
    expect((await account(key!.accountId)).textUsedTokens).toBe(10n);
  });

  it("expires reservations of requests that never settle", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 1000n } });
    const keyId = key!.keyId;
    await h.client.admit({ keyId, requestId: "lost", kind: TEXT, reserveTokens: 900n });
    h.advance(15 * 60_000 - 1);
    expect((await account(key!.accountId)).textReservedTokens).toBe(900n);
    expect((await failure(h.client.admit({ keyId, requestId: "n1", kind: TEXT, reserveTokens: 200n }))).code).toBe(Code.ResourceExhausted);
    h.advance(1);
    expect((await account(key!.accountId)).textReservedTokens).toBe(0n);
    await h.client.admit({ keyId, requestId: "n2", kind: TEXT, reserveTokens: 900n });
    // A late settle of the expired request still charges what it used.
    await h.client.settle({ keyId, requestId: "lost", kind: TEXT, usage: { completionTokens: 50n } });
    expect(await account(key!.accountId)).toMatchObject({ textUsedTokens: 50n, textReservedTokens: 900n });
  });

  it("takes the reservation expiry from the deps", async () => {
    await h.close();
    h = await startHarness({ reservationTtlMs: 1000 });
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 10n } });
    await h.client.admit({ keyId: key!.keyId, requestId: "a", kind: TEXT, reserveTokens: 10n });
    h.advance(1000);
    await h.client.admit({ keyId: key!.keyId, requestId: "b", kind: TEXT, reserveTokens: 10n });
  });

  it("never over-reserves under concurrency", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 1000n } });
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => h.client.admit({ keyId: key!.keyId, requestId: `c${i}`, kind: TEXT, reserveTokens: 100n })),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(10);
    expect((await account(key!.accountId)).textReservedTokens).toBe(1000n);
  });
});

describe("Settle: idempotency", () => {
  it("counts a request settled twice once", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 1000n } });
    const keyId = key!.keyId;
    await h.client.admit({ keyId, requestId: "once", kind: TEXT, reserveTokens: 300n });
    const usage = { promptTokens: 10n, completionTokens: 20n };
    expect((await h.client.settle({ keyId, requestId: "once", kind: TEXT, usage })).alreadySettled).toBe(false);
    expect((await h.client.settle({ keyId, requestId: "once", kind: TEXT, usage })).alreadySettled).toBe(true);
    expect(await account(key!.accountId)).toMatchObject({ textUsedTokens: 30n, textReservedTokens: 0n });
    const { days } = await h.client.getUsage({ keyId });
    expect(days).toHaveLength(1);
    expect(days[0]).toMatchObject({ requests: 1n, promptTokens: 10n, completionTokens: 20n });
  });

  it("charges once when the same request is settled concurrently", async () => {
    const { key } = await h.client.createKey({});
    const settles = await Promise.all(
      Array.from({ length: 20 }, () => h.client.settle({ keyId: key!.keyId, requestId: "dup", kind: TEXT, usage: { promptTokens: 5n } })),
    );
    expect(settles.filter((s) => !s.alreadySettled)).toHaveLength(1);
    expect((await account(key!.accountId)).textUsedTokens).toBe(5n);
  });

  it("charges a request that was never admitted, and only once", async () => {
    const { key } = await h.client.createKey({ limits: { textQuotaTokens: 100n } });
    const req = { keyId: key!.keyId, requestId: "from-the-bus", kind: TEXT, usage: { promptTokens: 40n, completionTokens: 2n } };
    await h.client.settle(req);
    await h.client.settle(req);
    expect((await account(key!.accountId)).textUsedTokens).toBe(42n);
  });

  it("tells requests of different keys apart", async () => {
    const a = await h.client.createKey({});
    const b = await h.client.createKey({ accountId: a.key!.accountId });
    await h.client.settle({ keyId: a.key!.keyId, requestId: "same", kind: TEXT, usage: { promptTokens: 1n } });
    expect(
      (await h.client.settle({ keyId: b.key!.keyId, requestId: "same", kind: TEXT, usage: { promptTokens: 1n } })).alreadySettled,
    ).toBe(false);
    expect((await account(a.key!.accountId)).textUsedTokens).toBe(2n);
  });

  it("still charges a key revoked after admission", async () => {
    const { key } = await h.client.createKey({});
    await h.client.admit({ keyId: key!.keyId, requestId: "r", kind: TEXT, reserveTokens: 10n });
    await h.client.revokeKey({ keyId: key!.keyId });
    await h.client.settle({ keyId: key!.keyId, requestId: "r", kind: TEXT, usage: { promptTokens: 3n } });
    expect((await account(key!.accountId)).textUsedTokens).toBe(3n);
  });

  it("forgets settled request ids after the retention period", async () => {
    await h.close();
    h = await startHarness({ settledRetentionMs: 3600_000 });
    const { key } = await h.client.createKey({});
    const req = { keyId: key!.keyId, requestId: "r", kind: TEXT, usage: { promptTokens: 1n } };
    await h.client.settle(req);
    h.advance(3600_000 - 1);
    expect((await h.client.settle(req)).alreadySettled).toBe(true);
    h.advance(1);
    expect((await h.client.settle(req)).alreadySettled).toBe(false);
  });

  it("validates its input", async () => {
    const { key } = await h.client.createKey({});
    const keyId = key!.keyId;
    expect((await failure(h.client.settle({ keyId, requestId: "" }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.settle({ keyId: "", requestId: "x" }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.settle({ keyId: "key_unknown", requestId: "x" }))).code).toBe(Code.NotFound);
    expect((await failure(h.client.settle({ keyId, requestId: "x", kind: 9 as UsageKind }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.settle({ keyId, requestId: "x", usage: { promptTokens: 2n ** 63n } }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.admit({ keyId, kind: TEXT, reserveTokens: 1n }))).code).toBe(Code.InvalidArgument);
    // Odd characters in request ids are fine: they are hashed before they reach the store.
    await h.client.settle({ keyId, requestId: "ä b*c>d.", kind: TEXT, usage: { promptTokens: 1n } });
  });
});

describe("GetUsage: the ledger per key and UTC day", () => {
  it("sums settled requests per day and filters by day range", async () => {
    const { key } = await h.client.createKey({});
    const keyId = key!.keyId;
    const day = (n: number) => T0 + n * 86_400_000;
    h.setTime(day(0));
    await h.client.settle({ keyId, requestId: "1", kind: TEXT, usage: { promptTokens: 10n, completionTokens: 1n } });
    await h.client.settle({ keyId, requestId: "2", kind: DECISION, usage: { inputTokens: 7n } });
    h.setTime(day(2) - 10 * 3600_000 - 1); // 2026-01-16T23:59:59.999Z
    await h.client.settle({ keyId, requestId: "3", kind: TEXT, usage: { promptTokens: 5n } });
    h.setTime(day(2));
    await h.client.settle({ keyId, requestId: "4", kind: TEXT, usage: { promptTokens: 2n } });
    // A request that used nothing (refused after admission: a 529) leaves no entry.
    await h.client.settle({ keyId, requestId: "5", kind: TEXT, usage: {} });

    const all = await h.client.getUsage({ keyId });
    expect(all.days.map((d) => [d.day, d.requests, d.promptTokens, d.completionTokens, d.decisionInputTokens])).toEqual([
      ["2026-01-15", 2n, 10n, 1n, 7n],
      ["2026-01-16", 1n, 5n, 0n, 0n],
      ["2026-01-17", 1n, 2n, 0n, 0n],
    ]);
    expect((await h.client.getUsage({ keyId, fromDay: "2026-01-16" })).days.map((d) => d.day)).toEqual(["2026-01-16", "2026-01-17"]);
    expect((await h.client.getUsage({ keyId, toDay: "2026-01-16" })).days.map((d) => d.day)).toEqual(["2026-01-15", "2026-01-16"]);
    expect((await h.client.getUsage({ keyId, fromDay: "2026-01-16", toDay: "2026-01-16" })).days).toHaveLength(1);
    // Another key's ledger is separate.
    const other = await h.client.createKey({});
    expect((await h.client.getUsage({ keyId: other.key!.keyId })).days).toEqual([]);
  });

  it("refuses malformed days and reversed ranges", async () => {
    const { key } = await h.client.createKey({});
    const keyId = key!.keyId;
    for (const fromDay of ["2026-1-5", "2026-02-30", "yesterday", "2026-01-15T00:00:00Z"]) {
      expect((await failure(h.client.getUsage({ keyId, fromDay }))).code, fromDay).toBe(Code.InvalidArgument);
    }
    expect((await failure(h.client.getUsage({ keyId, fromDay: "2026-01-10", toDay: "2026-01-09" }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.getUsage({ keyId: "key_none" }))).code).toBe(Code.NotFound);
  });
});
