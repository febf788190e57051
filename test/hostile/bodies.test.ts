// Large valid bodies (issue 11, item 1): three concurrent 7.4 MB chat bodies (2,048 messages of
// 3.6 KB) sent to `tessera serve` in a process of its own must not hold its event loop: /healthz,
// /readyz and /metrics answer within 1 s throughout, on the public port and on the operations
// port (TESSERA_OPS_PORT; /metrics there only), and no answer is a 5xx. The same for decisions whose state is a
// multi-megabyte object (issue 39): checked and refused on the body worker.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hugeChatBody, objectStateDecisionBody, probeWhile, startTinyServe, type TinyServe } from "../helpers/hostile.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

let serve: TinyServe;
const key = () => serve.key;

beforeAll(async () => {
  serve = await startTinyServe("bodies", TINY_MODEL_DIR, {
    TESSERA_OPS_PORT: "0",
  });
}, 90_000);
afterAll(async () => {
  await serve?.close();
});

describe("three concurrent 7.4 MB chat bodies", () => {
  it("leave /healthz, /readyz and /metrics answering within 1 s, with no 5xx", { timeout: 120_000 }, async () => {
    const body = hugeChatBody();
    expect(body.length).toBeGreaterThan(7_000_000);
    const chats = Promise.all(
      [0, 1, 2].map(async () => {
        const res = await fetch(`${serve.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key()}`, "content-type": "application/json" },
          body,
        });
        return { status: res.status, body: (await res.json()) as { error?: { message: string } } };
      }),
    );
    // Probes start at once and run until every chat is answered (a probe that fails counts its 5 s timeout).
    // With an operations port, /metrics is served there only.
    const [publicProbes, opsProbes] = await Promise.all([
      probeWhile(serve.url, ["/healthz", "/readyz"], chats, 50),
      probeWhile(serve.opsUrl!, ["/healthz", "/readyz", "/metrics"], chats, 50),
    ]);
    const probes = [...publicProbes, ...opsProbes];
    const answers = await chats;
    for (const answer of answers) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body.error?.message).toMatch(/prompt too long/);
    }
    for (const probe of probes) {
      expect(probe.failures, JSON.stringify(probes)).toBe(0);
      expect(probe.tries).toBeGreaterThan(0);
      expect(probe.maxMs, JSON.stringify(probes)).toBeLessThanOrEqual(1000);
    }
  });
});

describe("three concurrent 7 MB decisions whose state is one object (issue 39, item 2)", () => {
  it("are refused 422 on the body worker, the probes answering within 1 s", { timeout: 120_000 }, async () => {
    const body = objectStateDecisionBody(7_000_000);
    expect(body.length).toBeGreaterThan(7_000_000);
    const decisions = Promise.all(
      [0, 1, 2].map(async () => {
        const res = await fetch(`${serve.url}/v1/systemone`, {
          method: "POST",
          headers: { authorization: `Bearer ${key()}`, "content-type": "application/json" },
          body,
        });
        return { status: res.status, body: (await res.json()) as { detail?: { loc: string[]; type: string }[] } };
      }),
    );
    const probes = await probeWhile(serve.url, ["/healthz"], decisions, 50);
    for (const answer of await decisions) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(422);
      expect(answer.body.detail).toEqual([expect.objectContaining({ loc: ["body", "state"], type: "too_long" })]);
    }
    for (const probe of probes) {
      expect(probe.failures, JSON.stringify(probes)).toBe(0);
      expect(probe.maxMs, JSON.stringify(probes)).toBeLessThanOrEqual(1000);
    }
  });
});

describe("the operations port", () => {
  it("serves the probes and the metrics, and nothing else", async () => {
    expect(serve.opsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(serve.opsUrl).not.toBe(serve.url);
    expect((await fetch(`${serve.opsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${serve.opsUrl}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${serve.opsUrl}/metrics`);
    expect(await metrics.text()).toMatch(/tessera_http_requests_total/);
    const other = await fetch(`${serve.opsUrl}/v1/models`, { headers: { authorization: `Bearer ${key()}` } });
    expect(other.status).toBe(404);
    expect(((await other.json()) as { detail: { message: string } }).detail.message).toMatch(/only/);
  });

  it("is the only home of /metrics: the public port answers it 404 without a key (issue 39)", async () => {
    const refused = await fetch(`${serve.url}/metrics`);
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as { detail: { message: string } }).detail.message).toMatch(/operations port only \(TESSERA_OPS_PORT\)/);
    expect((await fetch(`${serve.url}/metrics?x=1`)).status).toBe(404);
    expect((await fetch(`${serve.url}/healthz`)).status).toBe(200);
  });
});
