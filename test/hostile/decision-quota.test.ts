// Decision quotas are reserved like text quotas (issue 11, item 3): parallel decisions on a small
// quota never overdraw it, and the refusal says what did not fit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { smallDecisionBody } from "../helpers/hostile.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_LOG_LEVEL: "warn" } });
});
afterAll(async () => {
  await tessera?.close();
});

async function decideInParallel(key: string, n: number) {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const res = await tessera.fetch("/v1/systemone", {
        method: "POST",
        key,
        headers: { "content-type": "application/json" },
        body: smallDecisionBody(2, "decisionmodel-latest"),
      });
      return { status: res.status, body: (await res.json()) as { detail?: { error_type?: string; message?: string } } };
    }),
  );
}

async function decisionUsed(accountId: string): Promise<bigint> {
  const { account } = await tessera.clients.accounting.getAccount({ accountId });
  expect(account!.decisionReservedTokens).toBe(0n);
  return account!.decisionUsedTokens;
}

describe("decision quota", () => {
  it("is never exceeded by 10 parallel decisions on a quota of 50", async () => {
    const { apiKey, accountId } = await tessera.createKey({ decisionQuota: 50 });
    const answers = await decideInParallel(apiKey, 10);
    for (const a of answers) expect([200, 429]).toContain(a.status);
    const refused = answers.find((a) => a.status === 429)!;
    expect(refused.body.detail?.error_type).toBe("insufficient_quota");
    expect(refused.body.detail?.message).toMatch(/must hold \d+ tokens of the decision quota .* only \d+ of 50 are left/);
    expect(await decisionUsed(accountId)).toBeLessThanOrEqual(50n);
  });

  it("is never exceeded by 10 parallel decisions on a quota that fits a few of them", async () => {
    const { apiKey, accountId } = await tessera.createKey({ decisionQuota: 5000 });
    const answers = await decideInParallel(apiKey, 10);
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    for (const a of answers) expect([200, 429]).toContain(a.status);
    expect(await decisionUsed(accountId)).toBeLessThanOrEqual(5000n);
  });
});
