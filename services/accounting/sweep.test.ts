import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AccountingService, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { gatewayInstances } from "../../lib/heartbeats/gateway-instances.js";
import { createMemoryStore } from "../../lib/store/index.js";
import { silentLogger } from "../../test/helpers/accounting-harness.js";
import { openBuckets, SETTLED_RETENTION_MS } from "./records.js";
import { accountingRoutes } from "./server.js";
import { createGatewaySweep } from "./sweep.js";

async function setup() {
  const store = createMemoryStore();
  const client = createClient(
    AccountingService,
    createRouterTransport(accountingRoutes({ store, logger: silentLogger, defaultRequestsPerMinute: 0 })),
  );
  const gateways = gatewayInstances(store);
  const sweep = () => createGatewaySweep(openBuckets(store, SETTLED_RETENTION_MS), gateways, silentLogger);
  const { key } = await client.createKey({ name: "sweep", limits: { textQuotaTokens: 1000n } });
  const keyId = key!.keyId;
  const account = async () => (await client.getAccount({ accountId: key!.accountId })).account!;
  return { client, gateways, sweep, keyId, account };
}

describe("the sweep of requests whose gateway died", () => {
  it("charges a dead gateway's checkpoint once and releases its holds; a live gateway's and unnamed holds stay", async () => {
    const { client, gateways, sweep, keyId, account } = await setup();
    await gateways.put("gw_dead", { at: Date.now() });
    await gateways.put("gw_live", { at: Date.now() });
    const admit = (requestId: string, gatewayInstance: string) =>
      client.admit({ keyId, requestId, kind: UsageKind.TEXT, reserveTokens: 100n, gatewayInstance });
    await admit("streamed", "gw_dead");
    await client.admit({
      keyId,
      requestId: "streamed",
      kind: UsageKind.TEXT,
      delivered: { promptTokens: 7n, completionTokens: 5n },
      gatewayInstance: "gw_dead",
    });
    await admit("silent", "gw_dead");
    await admit("running", "gw_live");
    await admit("embedded", "");
    expect((await account()).textReservedTokens).toBe(400n);

    await gateways.delete("gw_dead");
    // Two replicas sweep at once, twice each (a holder must be gone two passes in a row).
    const [a, b] = [sweep(), sweep()];
    expect(await Promise.all([a(), b()])).toEqual([
      { chargedCheckpoints: 0, releasedHolds: 0 },
      { chargedCheckpoints: 0, releasedHolds: 0 },
    ]);
    const second = await Promise.all([a(), b()]);
    expect(second.reduce((n, r) => n + r.chargedCheckpoints, 0)).toBe(1);
    expect(second.reduce((n, r) => n + r.releasedHolds, 0)).toBe(1);

    const after = await account();
    expect(after.textUsedTokens).toBe(12n);
    expect(after.textReservedTokens).toBe(200n);
    const { days } = await client.getUsage({ keyId });
    expect(days).toHaveLength(1);
    expect(days[0]).toMatchObject({ requests: 1n, promptTokens: 7n, completionTokens: 5n });
    // The stream's own usage arriving late counts nothing more.
    const late = await client.settle({
      keyId,
      requestId: "streamed",
      kind: UsageKind.TEXT,
      usage: { promptTokens: 7n, completionTokens: 9n },
    });
    expect(late.alreadySettled).toBe(true);
    expect(await a()).toEqual({ chargedCheckpoints: 0, releasedHolds: 0 });
    expect((await account()).textUsedTokens).toBe(12n);
  });

  it("leaves a request alone that settled before its gateway was found dead", async () => {
    const { client, gateways, sweep, keyId, account } = await setup();
    await gateways.put("gw_x", { at: Date.now() });
    await client.admit({ keyId, requestId: "r", kind: UsageKind.TEXT, reserveTokens: 100n, gatewayInstance: "gw_x" });
    await client.admit({ keyId, requestId: "r", kind: UsageKind.TEXT, delivered: { promptTokens: 3n }, gatewayInstance: "gw_x" });
    await client.settle({ keyId, requestId: "r", kind: UsageKind.TEXT, usage: { promptTokens: 3n, completionTokens: 4n } });
    await gateways.delete("gw_x");
    const pass = sweep();
    await pass();
    expect(await pass()).toEqual({ chargedCheckpoints: 0, releasedHolds: 0 });
    expect(await account()).toMatchObject({ textUsedTokens: 7n, textReservedTokens: 0n });
  });

  it("refuses a malformed gateway instance", async () => {
    const { client, keyId } = await setup();
    await expect(client.admit({ keyId, requestId: "r", kind: UsageKind.TEXT, gatewayInstance: "a.b" })).rejects.toThrow(/gateway_instance/);
  });
});
