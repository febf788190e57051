// The one settle sequence (marker → ledger → charge) and what Settle deletes of a request's checkpoint.
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AccountingService, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { flakyStore, silentLogger } from "../../test/helpers/accounting-harness.js";
import { requestKey } from "./ids.js";
import { ledgerKey, openBuckets, SETTLED_RETENTION_MS, type SettledMarker } from "./records.js";
import { accountingRoutes } from "./server.js";
import { settleOnce } from "./settle-once.js";

const DAY = "2026-01-15";
const usage = (completion: number): SettledMarker => ({ at: 0, day: DAY, keyId: "key_1", prompt: 4, completion, decisionInput: 0 });

function buckets(failing = new Set<string>()) {
  return openBuckets(flakyStore(failing), SETTLED_RETENTION_MS);
}

describe("settleOnce", () => {
  it("drops the marker it created when the ledger write fails, charges nothing, and a retry does it all", async () => {
    const failing = new Set(["accounting_ledger_entries"]);
    const b = buckets(failing);
    const charges: SettledMarker[] = [];
    const charge = async (s: SettledMarker) => void charges.push(s);
    await expect(settleOnce(b, "key_1", "key_1.r1", usage(6), charge)).rejects.toThrow("disk full");
    expect(await b.settled.get("key_1.r1")).toBeNull();
    expect(charges).toEqual([]);

    failing.clear();
    expect(await settleOnce(b, "key_1", "key_1.r1", usage(6), charge)).toBe(true);
    expect((await b.ledger.get(ledgerKey("key_1", DAY, "key_1.r1")))?.value).toMatchObject({ prompt: 4, completion: 6, decisionInput: 0 });
    expect(charges).toEqual([usage(6)]);
  });

  it("charges only once; a later call completes the ledger from the marker that won, not from its own usage", async () => {
    const b = buckets();
    const charges: SettledMarker[] = [];
    const charge = async (s: SettledMarker) => void charges.push(s);
    await b.settled.create("key_1.r2", usage(3)); // a settle that died between its marker and its ledger entry
    expect(await settleOnce(b, "key_1", "key_1.r2", usage(99), charge)).toBe(false);
    expect((await b.ledger.get(ledgerKey("key_1", DAY, "key_1.r2")))?.value.completion).toBe(3);
    expect(charges).toEqual([]);
  });

  it("writes no ledger entry for a request that used nothing, and still charges (releases its hold)", async () => {
    const b = buckets();
    let charged = 0;
    const zero = { ...usage(0), prompt: 0 };
    expect(await settleOnce(b, "key_1", "key_1.r3", zero, async () => void charged++)).toBe(true);
    expect(await b.ledger.get(ledgerKey("key_1", DAY, "key_1.r3"))).toBeNull();
    expect(charged).toBe(1);
  });
});

describe("Settle and the request's checkpoint", () => {
  it("deletes the progress entry only of a request that checkpointed", async () => {
    const deleted: string[] = [];
    const client = createClient(
      AccountingService,
      createRouterTransport(accountingRoutes({ store: flakyStore(new Set(), deleted), logger: silentLogger, defaultRequestsPerMinute: 0 })),
    );
    const { key } = await client.createKey({});
    const keyId = key!.keyId;
    const usage = { promptTokens: 5n, completionTokens: 2n };
    await client.settle({ keyId, requestId: "plain", kind: UsageKind.TEXT, usage });
    await client.admit({ keyId, requestId: "streamed", kind: UsageKind.TEXT, delivered: usage });
    await client.settle({ keyId, requestId: "streamed", kind: UsageKind.TEXT, usage, checkpointed: true });
    await new Promise((r) => setImmediate(r)); // the delete is not awaited by Settle
    expect(deleted.filter((d) => d.startsWith("accounting_progress/"))).toEqual([`accounting_progress/${requestKey(keyId, "streamed")}`]);
  });
});
