import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { AccountingService, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { openEmbeddedAccounting } from "./embedded.js";
import { silentLogger } from "../../test/helpers/accounting-harness.js";

const dataDir = mkdtempSync(join(tmpdir(), "tessera-embedded-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const clientFor = (routes: Awaited<ReturnType<typeof openEmbeddedAccounting>>["routes"]) =>
  createClient(AccountingService, createRouterTransport(routes));

describe("embedded accounting", () => {
  it("keeps keys, accounts, quotas and the ledger across restarts; rate windows start afresh", async () => {
    const first = await openEmbeddedAccounting({ dataDir, logger: silentLogger, defaultRequestsPerMinute: 1 });
    let client = clientFor(first.routes);
    const { apiKey, key } = await client.createKey({ limits: { textQuotaTokens: 100n } });
    const keyId = key!.keyId;
    await client.admit({ keyId, requestId: "a", kind: UsageKind.TEXT, reserveTokens: 10n });
    await expect(client.admit({ keyId })).rejects.toThrow(/Rate limit/);
    await client.settle({ keyId, requestId: "a", kind: UsageKind.TEXT, usage: { promptTokens: 4n, completionTokens: 5n } });
    await first.close();

    const second = await openEmbeddedAccounting({ dataDir, logger: silentLogger, defaultRequestsPerMinute: 1 });
    client = clientFor(second.routes);
    expect((await client.authenticate({ apiKey })).principal!.keyId).toBe(keyId);
    await client.admit({ keyId }); // the memory rate window did not survive the restart
    const { account } = await client.getAccount({ accountId: key!.accountId });
    expect(account).toMatchObject({ textQuotaTokens: 100n, textUsedTokens: 9n });
    expect((await client.settle({ keyId, requestId: "a", kind: UsageKind.TEXT, usage: { promptTokens: 4n } })).alreadySettled).toBe(true);
    expect((await client.getUsage({ keyId })).days[0]!.requests).toBe(1n);
    await second.close();
  });
});
