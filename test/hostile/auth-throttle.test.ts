// Failed authentications are throttled per client address (issue 11, item 6): past the budget,
// guesses from that address get 429 with retry-after in the documented shape, before their key is
// looked up; a key that authenticated recently is never slowed, and other addresses are not touched.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKey, startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({ models: "none", env: { TESSERA_LOG_LEVEL: "warn", TESSERA_AUTH_FAILURES_PER_MINUTE: "5" } });
});
afterAll(async () => {
  await tessera?.close();
});

/** GET /v1/models with `key` from `localAddress` (127.0.0.x): status, retry-after and the JSON body. */
function models(
  key: string,
  localAddress: string,
): Promise<{ status: number; retryAfter: string | undefined; body: { error?: { type: string; code: string; message: string } } }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: tessera.port,
        path: "/v1/models",
        localAddress,
        agent: false,
        headers: { authorization: `Bearer ${key}` },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"], body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("failed authentication", () => {
  it("is answered 401 within the budget, then 429 with retry-after; valid keys from that address and other addresses are served", async () => {
    const attacker = "127.0.0.2";
    // A valid key used from the attacker's address before the guessing starts.
    expect((await models(tessera.key, attacker)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await models(newApiKey(), attacker)).status).toBe(401);
    const throttled = await models(newApiKey(), attacker);
    expect(throttled.status).toBe(429);
    expect(Number(throttled.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(throttled.retryAfter)).toBeLessThanOrEqual(12);
    expect(throttled.body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
    expect(throttled.body.error?.message).toMatch(/failed authentications from this address: at most 5 per minute/);
    // Throttled guesses are not looked up, so even a run of them keeps answering 429.
    for (let i = 0; i < 20; i++) expect((await models(newApiKey(), attacker)).status).toBe(429);
    // The valid key is not slowed on the attacker's address, nor is anyone on another address.
    const started = performance.now();
    expect((await models(tessera.key, attacker)).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(1000);
    expect((await models(newApiKey(), "127.0.0.3")).status).toBe(401);
    const other = await tessera.createKey();
    expect((await models(other.apiKey, "127.0.0.3")).status).toBe(200);
  });
});
