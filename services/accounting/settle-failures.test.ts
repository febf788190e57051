// Settle when the store fails part-way: never counted twice, and retried when nothing was charged.
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AccountingService, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { accountingRoutes } from "./server.js";
import { failure, flakyStore, silentLogger } from "../../test/helpers/accounting-harness.js";

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
