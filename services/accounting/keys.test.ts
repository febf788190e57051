import { createHash } from "node:crypto";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AccountingService, AccountStatus } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { accountingRoutes } from "./server.js";
import { failure, silentLogger, startHarness, type Harness } from "../../test/helpers/accounting-harness.js";

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.close();
});

const BUCKETS = [
  "accounting_keys",
  "accounting_key_hashes",
  "accounting_accounts",
  "accounting_quotas",
  "accounting_ledger",
  "accounting_settled",
];

describe("keys", () => {
  it("issues tsr_ keys with 32 random bytes and authenticates them", async () => {
    const { apiKey, key } = await h.client.createKey({ name: "ci" });
    expect(apiKey).toMatch(/^tsr_[0-9A-Za-z]{43}$/);
    expect(key!.keyId).toMatch(/^key_[0-9A-Za-z]{12}$/);
    expect(key!.accountId).toMatch(/^acct_[0-9A-Za-z]{12}$/);
    expect(key!.requestsPerMinute).toBe(1000); // the service default
    const { principal } = await h.client.authenticate({ apiKey });
    expect(principal).toMatchObject({ keyId: key!.keyId, accountId: key!.accountId, keyName: "ci" });
    const other = await h.client.createKey({});
    expect(other.apiKey).not.toBe(apiKey);
    expect(other.key!.accountId).not.toBe(key!.accountId);
  });

  it("stores only a hash of the secret", async () => {
    const { apiKey, key } = await h.client.createKey({ name: "at-rest" });
    let dump = "";
    for (const name of BUCKETS) {
      const bucket = h.store.bucket(name);
      for await (const k of bucket.keys()) dump += `${name}/${k} ${JSON.stringify((await bucket.get(k))!.value)}\n`;
    }
    const secretPart = apiKey.slice(4);
    expect(dump).not.toContain(secretPart);
    const hashHex = createHash("sha256").update(apiKey).digest("hex");
    expect(dump).toContain(hashHex);
    expect(dump).toContain(key!.keyId);
  });

  it("refuses unknown, malformed and empty keys with Unauthenticated", async () => {
    await h.client.createKey({});
    for (const apiKey of [`tsr_${"x".repeat(43)}`, "", "Bearer tsr_abc", "sk-abc", `tsr_${"a".repeat(300)}`, "tsr_ä"]) {
      const err = await failure(h.client.authenticate({ apiKey }));
      expect(err.code, apiKey).toBe(Code.Unauthenticated);
    }
  });

  it("revokes a key at once, even after it was cached", async () => {
    const { apiKey, key } = await h.client.createKey({});
    await h.client.authenticate({ apiKey }); // warms the cache
    const { key: revoked } = await h.client.revokeKey({ keyId: key!.keyId });
    expect(revoked!.revoked).toBe(true);
    const err = await failure(h.client.authenticate({ apiKey }));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toMatch(/revoked/);
    const admit = await failure(h.client.admit({ keyId: key!.keyId, requestId: "r1" }));
    expect(admit.code).toBe(Code.Unauthenticated);
    // Revoking twice is harmless; unknown keys are NotFound.
    expect((await h.client.revokeKey({ keyId: key!.keyId })).key!.revoked).toBe(true);
    expect((await failure(h.client.revokeKey({ keyId: "key_nope" }))).code).toBe(Code.NotFound);
    expect((await failure(h.client.revokeKey({ keyId: "bad id!" }))).code).toBe(Code.InvalidArgument);
  });

  it("sees a revocation or an account status set by another replica once its cache entry is older than the cache's life", async () => {
    // A second service on the same durable store: another replica, or the admin CLI.
    const other = createClient(
      AccountingService,
      createRouterTransport(
        accountingRoutes({
          store: h.store,
          rateLimiter: h.rateLimiter,
          clock: h.now,
          logger: silentLogger,
          defaultRequestsPerMinute: 1000,
        }),
      ),
    );
    const { key } = await h.client.createKey({});
    const keyId = key!.keyId;
    await h.client.admit({ keyId }); // cached here
    await other.setAccountStatus({ accountId: key!.accountId, status: AccountStatus.DISABLED });
    h.advance(4_000);
    await h.client.admit({ keyId }); // still within the 5 s cache window
    h.advance(1_000);
    expect((await failure(h.client.admit({ keyId }))).code).toBe(Code.PermissionDenied);

    await other.setAccountStatus({ accountId: key!.accountId, status: AccountStatus.ACTIVE });
    h.advance(5_000);
    await h.client.admit({ keyId });
    await other.revokeKey({ keyId });
    h.advance(5_000);
    expect((await failure(h.client.admit({ keyId }))).code).toBe(Code.Unauthenticated);
  });

  it("lists keys oldest first, without secrets", async () => {
    const a = await h.client.createKey({ name: "a" });
    h.advance(1000);
    const b = await h.client.createKey({ name: "b", limits: { requestsPerMinute: 7 } });
    await h.client.revokeKey({ keyId: a.key!.keyId });
    const { keys } = await h.client.listKeys({});
    expect(keys.map((k) => [k.name, k.revoked, k.requestsPerMinute])).toEqual([
      ["a", true, 1000],
      ["b", false, 7],
    ]);
    expect(Number(keys[1]!.createdUnixMs) - Number(keys[0]!.createdUnixMs)).toBe(1000);
    expect(JSON.stringify(keys, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(b.apiKey.slice(4));
  });

  it("adds keys to an existing account; quotas cannot be set that way", async () => {
    const first = await h.client.createKey({ limits: { textQuotaTokens: 500n } });
    const second = await h.client.createKey({ accountId: first.key!.accountId, name: "second" });
    expect(second.key!.accountId).toBe(first.key!.accountId);
    expect((await h.client.authenticate({ apiKey: second.apiKey })).principal!.accountId).toBe(first.key!.accountId);
    const err = await failure(h.client.createKey({ accountId: first.key!.accountId, limits: { textQuotaTokens: 1n } }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.createKey({ accountId: "acct_missing" }))).code).toBe(Code.NotFound);
    expect((await failure(h.client.createKey({ name: "x".repeat(201) }))).code).toBe(Code.InvalidArgument);
    expect((await failure(h.client.createKey({ name: "a\nb" }))).code).toBe(Code.InvalidArgument);
  });
});

describe("accounts", () => {
  it("answers PermissionDenied for disabled and unverified accounts, and says which", async () => {
    const { apiKey, key } = await h.client.createKey({});
    const accountId = key!.accountId;
    await h.client.authenticate({ apiKey });

    await h.client.setAccountStatus({ accountId, status: AccountStatus.DISABLED });
    let err = await failure(h.client.authenticate({ apiKey }));
    expect(err.code).toBe(Code.PermissionDenied);
    expect(err.rawMessage).toMatch(/disabled/);
    expect((await failure(h.client.admit({ keyId: key!.keyId }))).code).toBe(Code.PermissionDenied);

    await h.client.setAccountStatus({ accountId, status: AccountStatus.EMAIL_UNVERIFIED });
    err = await failure(h.client.authenticate({ apiKey }));
    expect(err.code).toBe(Code.PermissionDenied);
    expect(err.rawMessage).toMatch(/not verified/);

    const { account } = await h.client.setAccountStatus({ accountId, status: AccountStatus.ACTIVE });
    expect(account!.status).toBe(AccountStatus.ACTIVE);
    await h.client.authenticate({ apiKey });
  });

  it("validates status changes", async () => {
    const { key } = await h.client.createKey({});
    const bad = await failure(h.client.setAccountStatus({ accountId: key!.accountId, status: AccountStatus.UNSPECIFIED }));
    expect(bad.code).toBe(Code.InvalidArgument);
    const missing = await failure(h.client.setAccountStatus({ accountId: "acct_none", status: AccountStatus.DISABLED }));
    expect(missing.code).toBe(Code.NotFound);
    expect((await failure(h.client.getAccount({ accountId: "" }))).code).toBe(Code.InvalidArgument);
  });

  it("sets limits: unset fields stay, 0 rpm means the default", async () => {
    const { key } = await h.client.createKey({ limits: { requestsPerMinute: 5, textQuotaTokens: 100n } });
    let res = await h.client.setLimits({ keyId: key!.keyId, limits: { decisionQuotaTokens: 50n } });
    expect(res.key!.requestsPerMinute).toBe(5);
    expect(res.account).toMatchObject({ textQuotaTokens: 100n, decisionQuotaTokens: 50n });
    res = await h.client.setLimits({ keyId: key!.keyId, limits: { requestsPerMinute: 0, textQuotaTokens: 0n } });
    expect(res.key!.requestsPerMinute).toBe(1000);
    expect(res.account).toMatchObject({ textQuotaTokens: 0n, decisionQuotaTokens: 50n });
    expect((await failure(h.client.setLimits({ keyId: "key_none", limits: {} }))).code).toBe(Code.NotFound);
    const huge = await failure(h.client.setLimits({ keyId: key!.keyId, limits: { textQuotaTokens: 2n ** 60n } }));
    expect(huge.code).toBe(Code.InvalidArgument);
  });
});

describe("EnsureKey (bootstrap key)", () => {
  const secret = "tsr_bootstrap-secret-for-tests";

  it("creates the exact key once, then finds it", async () => {
    const first = await h.client.ensureKey({ apiKey: secret, name: "boot" });
    expect(first.created).toBe(true);
    expect(first.key!.name).toBe("boot");
    const second = await h.client.ensureKey({ apiKey: secret });
    expect(second.created).toBe(false);
    expect(second.key!.keyId).toBe(first.key!.keyId);
    expect((await h.client.authenticate({ apiKey: secret })).principal!.keyId).toBe(first.key!.keyId);
    expect((await h.client.listKeys({})).keys).toHaveLength(1);
  });

  it("reinstates a revoked key and re-activates its account", async () => {
    const { key } = await h.client.ensureKey({ apiKey: secret });
    await h.client.revokeKey({ keyId: key!.keyId });
    await h.client.setAccountStatus({ accountId: key!.accountId, status: AccountStatus.DISABLED });
    const again = await h.client.ensureKey({ apiKey: secret });
    expect(again).toMatchObject({ created: false, key: { keyId: key!.keyId, revoked: false } });
    expect((await h.client.getAccount({ accountId: key!.accountId })).account!.status).toBe(AccountStatus.ACTIVE);
    await h.client.authenticate({ apiKey: secret });
  });

  it("creates one key when called concurrently", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => h.client.ensureKey({ apiKey: secret })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.key!.keyId)).size).toBe(1);
    expect((await h.client.listKeys({})).keys).toHaveLength(1);
    await h.client.authenticate({ apiKey: secret });
  });

  it("refuses secrets that are not tsr_ keys", async () => {
    for (const apiKey of ["", "tsr_", "sk-123", "tsr_has space"]) {
      expect((await failure(h.client.ensureKey({ apiKey }))).code, apiKey).toBe(Code.InvalidArgument);
    }
  });
});
