// Accounting behind the embedded mode's in-process transport (lib/in-process-transport.ts):
// the request path's wiring, so codes and details must come through as over the network.
import { Code, createClient } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AccountingService, QuotaExceededSchema, RateLimitedSchema, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createInProcessTransport } from "../../lib/in-process-transport.js";
import { createMemoryStore } from "../../lib/store/index.js";
import { createAccountingService } from "./service.js";
import { failure, silentLogger } from "../../test/helpers/accounting-harness.js";

describe("accounting over the in-process transport", () => {
  it("returns messages and the same errors, with details, as a remote client gets", async () => {
    const impl = createAccountingService({ store: createMemoryStore(), logger: silentLogger, defaultRequestsPerMinute: 1 });
    const client = createClient(
      AccountingService,
      createInProcessTransport((s) => s.service(AccountingService, impl)),
    );
    const { apiKey, key } = await client.createKey({ limits: { textQuotaTokens: 5n } });
    const { principal } = await client.authenticate({ apiKey });
    expect(principal!.keyId).toBe(key!.keyId);

    expect((await failure(client.authenticate({ apiKey: "tsr_nope" }))).code).toBe(Code.Unauthenticated);
    const quota = await failure(client.admit({ keyId: key!.keyId, requestId: "r", kind: UsageKind.TEXT, reserveTokens: 6n }));
    expect(quota.code).toBe(Code.ResourceExhausted);
    expect(quota.findDetails(QuotaExceededSchema)[0]).toMatchObject({ quotaTokens: 5n, availableTokens: 5n });
    const rate = await failure(client.admit({ keyId: key!.keyId }));
    expect(rate.code).toBe(Code.ResourceExhausted);
    expect(rate.findDetails(RateLimitedSchema)[0]).toMatchObject({ limit: 1 });
    expect((await failure(client.getUsage({ keyId: key!.keyId, fromDay: "nope" }))).code).toBe(Code.InvalidArgument);
  });
});
