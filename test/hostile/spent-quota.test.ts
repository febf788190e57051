// A key whose quota is used up is refused before its body is read (issue 11, item 1): no parsing,
// no token counting, 429 insufficient_quota at once; and the check counts nothing itself.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { hugeChatBody } from "../helpers/hostile.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_LOG_LEVEL: "warn" } });
});
afterAll(async () => {
  await tessera?.close();
});

/** A key of a new account whose text and decision quotas of 50 are used up (a settle of 60 each). */
async function spentKey(rpm?: number) {
  const key = await tessera.createKey({ textQuota: 50, decisionQuota: 50, ...(rpm !== undefined && { rpm }) });
  const usage = { promptTokens: 60n, completionTokens: 0n, inputTokens: 60n };
  await tessera.clients.accounting.settle({ keyId: key.keyId, requestId: "spent-text", kind: UsageKind.TEXT, usage });
  await tessera.clients.accounting.settle({ keyId: key.keyId, requestId: "spent-decision", kind: UsageKind.DECISION, usage });
  return key;
}

const post = (path: string, apiKey: string, body: string) =>
  tessera.fetch(path, { method: "POST", key: apiKey, headers: { "content-type": "application/json" }, body });

describe("a key with no quota left", () => {
  it("is refused 429 insufficient_quota before its chat body is parsed", async () => {
    const { apiKey } = await spentKey();
    // Not JSON at all: a parsed body would be a 400.
    const broken = await post("/v1/chat/completions", apiKey, "{ this is not json");
    expect(broken.status).toBe(429);
    const body = (await broken.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("insufficient_quota");
    expect(body.error.message).toMatch(/quota is used up: 0 of 50 tokens left/);
    // 7.4 MB of valid chat: refused as fast, without a 400 "prompt too long" (nothing was counted).
    const started = performance.now();
    const huge = await post("/v1/chat/completions", apiKey, hugeChatBody());
    expect(huge.status).toBe(429);
    expect(((await huge.json()) as { error: { code: string } }).error.code).toBe("insufficient_quota");
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("is refused 429 before its decision body is parsed", async () => {
    const { apiKey } = await spentKey();
    const res = await post("/v1/systemone", apiKey, "[[[ not a decision");
    expect(res.status).toBe(429);
    expect(((await res.json()) as { detail: { error_type: string } }).detail.error_type).toBe("insufficient_quota");
  });

  it("is not counted against the per-minute limit by the check, and a key with quota left is served", async () => {
    const { apiKey } = await spentKey(2);
    for (let i = 0; i < 5; i++) expect((await post("/v1/chat/completions", apiKey, "{}")).status).toBe(429);
    // Every refusal was the quota's; the rate window (2 per minute) was never drawn on.
    const models = await tessera.fetch("/v1/models", { key: apiKey });
    expect(models.status).toBe(200);
    expect(models.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    const fresh = await tessera.createKey({ textQuota: 100_000 });
    const chat = JSON.stringify({ model: "textmodel-26b", max_tokens: 4, messages: [{ role: "user", content: "Hi" }] });
    expect((await post("/v1/chat/completions", fresh.apiKey, chat)).status).toBe(200);
  });
});
