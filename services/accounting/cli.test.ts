import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AccountStatus } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { runKeysCommand } from "./cli.js";
import { startHarness, type Harness } from "../../test/helpers/accounting-harness.js";

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.close();
});

async function run(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runKeysCommand(
    argv,
    h.client,
    (l) => out.push(l),
    (l) => err.push(l),
  );
  return { code, out, err };
}

async function createKey(...args: string[]) {
  const res = await run("create", ...args);
  expect(res.code).toBe(0);
  const apiKey = res.out.at(-1)!;
  const { principal } = await h.client.authenticate({ apiKey });
  return { ...res, apiKey, keyId: principal!.keyId, accountId: principal!.accountId };
}

describe("tessera keys", () => {
  it("create prints info lines and then the key alone on the last line", async () => {
    const { out, apiKey, keyId } = await createKey("--name", "ci bot", "--rpm", "30", "--text-quota=5000", "--decision-quota", "70");
    expect(apiKey).toMatch(/^tsr_[0-9A-Za-z]{43}$/);
    expect(out.length).toBeGreaterThan(1);
    expect(out.slice(0, -1).join("\n")).not.toContain(apiKey);
    expect(out[0]).toContain(keyId);
    const { key, account } = await h.client.setLimits({ keyId, limits: {} });
    expect(key).toMatchObject({ name: "ci bot", requestsPerMinute: 30 });
    expect(account).toMatchObject({ textQuotaTokens: 5000n, decisionQuotaTokens: 70n });
  });

  it("accepts `keys` as the first word too", async () => {
    const res = await run("keys", "create");
    expect(res.code).toBe(0);
    expect(res.out.at(-1)).toMatch(/^tsr_/);
  });

  it("lists, revokes and shows usage", async () => {
    const a = await createKey("--name", "alpha");
    h.advance(1);
    await createKey("--name", "beta");
    let list = await run("list");
    expect(list.code).toBe(0);
    expect(list.out[0]).toMatch(/^KEY_ID\s+ACCOUNT_ID\s+NAME\s+CREATED\s+RPM\s+STATE$/);
    expect(list.out).toHaveLength(3);
    expect(list.out[1]).toContain(a.keyId);
    expect(list.out.join("\n")).not.toContain(a.apiKey);

    expect((await run("revoke", a.keyId)).code).toBe(0);
    list = await run("list");
    expect(list.out[1]).toMatch(/revoked$/);
    await expect(h.client.authenticate({ apiKey: a.apiKey })).rejects.toThrow(/revoked/);

    await h.client.settle({ keyId: a.keyId, requestId: "r", usage: { promptTokens: 12n } });
    const usage = await run("usage", a.keyId, "--from", "2026-01-01");
    expect(usage.code).toBe(0);
    expect(usage.out[1]).toMatch(/^2026-01-15\s+1\s+12\s+0\s+0$/);
    expect((await run("usage", a.keyId, "--to", "2026-01-01")).out).toEqual(["No usage."]);
  });

  it("changes limits with quota and account status with disable/enable/unverify", async () => {
    const { keyId, accountId } = await createKey();
    const quota = await run("quota", keyId, "--rpm", "9", "--text-quota", "100");
    expect(quota.code).toBe(0);
    expect(quota.out.join("\n")).toMatch(/rpm 9/);
    expect(quota.out.join("\n")).toMatch(/text tokens:\s+quota 100/);
    expect((await run("quota", keyId)).out.join("\n")).toMatch(/decision tokens:\s+quota unlimited/);

    expect((await run("disable", accountId)).out[0]).toMatch(/status disabled/);
    expect((await h.client.getAccount({ accountId })).account!.status).toBe(AccountStatus.DISABLED);
    expect((await run("unverify", accountId)).code).toBe(0);
    expect((await h.client.getAccount({ accountId })).account!.status).toBe(AccountStatus.EMAIL_UNVERIFIED);
    expect((await run("enable", accountId)).code).toBe(0);
    expect((await run("account", accountId)).out[0]).toMatch(/status active/);
  });

  it("prints help with exit status 0", async () => {
    for (const argv of [["--help"], ["help"], ["create", "--help"]]) {
      const res = await run(...argv);
      expect(res.code).toBe(0);
      expect(res.out.join("\n")).toMatch(/Usage: tessera keys/);
    }
  });

  it("answers bad arguments with a message and exit status 2", async () => {
    const cases = [
      [],
      ["frobnicate"],
      ["create", "--rpm", "abc"],
      ["create", "--rpm", "-1"],
      ["create", "--rpm"],
      ["create", "--color", "red"],
      ["create", "extra"],
      ["create", "--name", "a", "--name", "b"],
      ["revoke"],
      ["revoke", "a", "b"],
      ["quota"],
      ["disable"],
      ["usage", "key_x", "--from", "soon"],
      ["create", "--text-quota", "99999999999999999999"],
    ];
    for (const argv of cases) {
      const res = await run(...argv);
      expect(res.code, argv.join(" ")).toBe(2);
      expect(res.err.length, argv.join(" ")).toBeGreaterThan(0);
      expect(res.out, argv.join(" ")).toEqual([]);
    }
  });

  it("exits 1 when the request fails", async () => {
    const res = await run("revoke", "key_doesnotexist");
    expect(res.code).toBe(1);
    expect(res.err[0]).toMatch(/No key key_doesnotexist/);
    expect((await run("enable", "acct_nobody")).code).toBe(1);
  });
});
