// Holds and the ledger tell the truth (issue 27, item 6; decisions' 529s, issue 39): a decision whose upper-bound hold
// (2 × body bytes + 512 per question) does not fit the quota is tokenized and holds its exact
// cost, so a key with a quota of cost + 3 runs it; 529 refusals leave no ledger entry; and
// `tessera keys list`, run without TESSERA_DEFAULT_RPM, shows the rate the server applies.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { smallDecisionBody, tesseraKeys } from "../helpers/hostile.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({
    models: "tiny",
    env: { TESSERA_LOG_LEVEL: "warn", TESSERA_SLOTS: "1", TESSERA_QUEUE: "0", TESSERA_DEFAULT_RPM: "4321" },
  });
});
afterAll(async () => {
  await tessera?.close();
});

async function decide(key: string) {
  const res = await tessera.fetch("/v1/systemone", {
    method: "POST",
    key,
    headers: { "content-type": "application/json" },
    body: smallDecisionBody(2, "decisionmodel-latest"),
  });
  return { status: res.status, body: (await res.json()) as { usage?: { input_tokens: number }; detail?: { message?: string } } };
}

async function ledgerRequests(keyId: string): Promise<bigint> {
  const { days } = await tessera.clients.accounting.getUsage({ keyId });
  return days.reduce((sum, d) => sum + d.requests, 0n);
}

describe("decision holds", () => {
  it("a decision costing C tokens is answered on a quota of C + 3, and charged C", async () => {
    const probe = await tessera.createKey({});
    const first = await decide(probe.apiKey);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const cost = first.body.usage!.input_tokens;
    expect(cost).toBeGreaterThan(10);

    const { apiKey, accountId } = await tessera.createKey({ decisionQuota: cost + 3 });
    const answer = await decide(apiKey);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const { account } = await tessera.clients.accounting.getAccount({ accountId });
    expect(account!.decisionUsedTokens).toBe(BigInt(cost));
    expect(account!.decisionReservedTokens).toBe(0n);
    // What is left no longer fits it: refused before it runs, nothing more charged.
    const refused = await decide(apiKey);
    expect(refused.status).toBe(429);
    expect((await tessera.clients.accounting.getAccount({ accountId })).account!.decisionUsedTokens).toBe(BigInt(cost));
  });
});

describe("the ledger", () => {
  it("has no entry for a 529 refusal", async () => {
    const { apiKey, keyId } = await tessera.createKey({});
    const body = JSON.stringify({ model: "textmodel-26b", max_tokens: 64, messages: [{ role: "user", content: "Count to ten." }] });
    const statuses = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const res = await tessera.fetch("/v1/chat/completions", {
          method: "POST",
          key: apiKey,
          headers: { "content-type": "application/json" },
          body,
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    const served = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s === 529).length, JSON.stringify(statuses)).toBeGreaterThan(0);
    expect(served + statuses.filter((s) => s === 529).length).toBe(8);
    expect(await ledgerRequests(keyId)).toBe(BigInt(served));
  });
});

describe("decisions beyond the slots and the queue (issue 39, item 4)", () => {
  it("are answered 529 overloaded_error with retry-after, as chats are, and leave no ledger entry", async () => {
    const { apiKey, keyId } = await tessera.createKey({});
    const answers = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const res = await tessera.fetch("/v1/systemone", {
          method: "POST",
          key: apiKey,
          headers: { "content-type": "application/json" },
          body: smallDecisionBody(2, "decisionmodel-latest"),
        });
        return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() };
      }),
    );
    const refused = answers.filter((a) => a.status === 529);
    expect(refused.length, JSON.stringify(answers.map((a) => a.status))).toBeGreaterThan(0);
    expect(refused[0]!.retryAfter).toMatch(/^\d+$/);
    expect(refused[0]!.text).toMatch(/overloaded_error.*decision slots are busy/);
    const served = answers.filter((a) => a.status === 200).length;
    expect(served + refused.length).toBe(6);
    expect(await ledgerRequests(keyId)).toBe(BigInt(served));
  });
});

describe("tessera keys list", () => {
  it("shows the rate the server applies, also without TESSERA_DEFAULT_RPM of its own", async () => {
    const { keyId } = await tessera.createKey({});
    const listed = await tesseraKeys(tessera.dataDir, ["list"]);
    const row = listed.split("\n").find((line) => line.startsWith(keyId));
    expect(row, listed).toMatch(/\s4321\s/);
  }, 30_000);
});
