// Settle when the store fails part-way: never counted twice, and retried when nothing was charged.
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AccountingService, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createMemoryStore, type KvBucket, type Store } from "../../lib/store/index.js";
import { accountingRoutes } from "./server.js";
import { failure, silentLogger } from "../../test/helpers/accounting-harness.js";

/** A memory store whose writes to the named buckets fail while `failing` holds their names. */
function flakyStore(failing: Set<string>): Store {
  const inner = createMemoryStore();
  const guard = (name: string) => {
    if (failing.has(name)) throw new Error(`disk full (${name})`);
  };
  return {
    bucket<T>(name: string, options?: { ttlMs?: number }): KvBucket<T> {
      const b = inner.bucket<T>(name, options);
      return {
        name,
        get: (key) => b.get(key),
        create: async (key, value) => {
          guard(name);
          return b.create(key, value);
        },
        update: async (key, value, revision) => {
          guard(name);
          return b.update(key, value, revision);
        },
        put: async (key, value) => {
          guard(name);
          return b.put(key, value);
        },
        delete: (key, revision) => b.delete(key, revision),
        keys: (prefix) => b.keys(prefix),
      };
    },
    close: () => inner.close(),
  };
}

async function setup() {
  const failing = new Set<string>();
  const store = flakyStore(failing);
  const client = createClient(
    AccountingService,
    createRouterTransport(accountingRoutes({ store, logger: silentLogger, defaultRequestsPerMinute: 100 })),
  );
  const { key } = await client.createKey({});
  const settle = () =>
    client.settle({ keyId: key!.keyId, requestId: "r1", kind: UsageKind.TEXT, usage: { promptTokens: 10n, completionTokens: 5n } });
  const used = async () => (await client.getAccount({ accountId: key!.accountId })).account!.textUsedTokens;
  const requests = async () => (await client.getUsage({ keyId: key!.keyId })).days[0]?.requests ?? 0n;
  return { failing, settle, used, requests };
}

describe("Settle with a failing store", () => {
  it("does the whole settle again on retry when the ledger entry was not written", async () => {
    const t = await setup();
    t.failing.add("accounting_ledger_entries");
    expect((await failure(t.settle())).code).toBe(Code.Internal);
    expect(await t.used()).toBe(0n);
    t.failing.clear();
    expect((await t.settle()).alreadySettled).toBe(false);
    expect(await t.used()).toBe(15n);
    expect(await t.requests()).toBe(1n);
  });

  it("keeps the ledger exact and never charges the quota twice when the quota write failed", async () => {
    const t = await setup();
    t.failing.add("accounting_quotas");
    await failure(t.settle());
    t.failing.clear();
    expect((await t.settle()).alreadySettled).toBe(true);
    expect(await t.requests()).toBe(1n); // the ledger has the request exactly once
    expect(await t.used()).toBe(0n); // the quota charge is at most once: lost, not doubled
  });

  it("charges nothing when the marker cannot be written", async () => {
    const t = await setup();
    t.failing.add("accounting_settled");
    await failure(t.settle());
    expect(await t.used()).toBe(0n);
    t.failing.clear();
    expect((await t.settle()).alreadySettled).toBe(false);
    expect(await t.used()).toBe(15n);
  });
});
