// A Decide over Connect whose state is a multi-megabyte object (issue 39): connect-node parses a
// request on the event loop, so the public port's Connect handlers of Decide and Score read at
// most CONNECT_DECISION_MAX_BYTES (2 MiB) and refuse a larger request resource_exhausted before
// it is parsed; /healthz answers within 1 s beside three 7 MB ones. A Decide within the bound is
// answered. The tiny model in a `tessera serve` of its own, on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { objectStateDecisionBody, probeWhile, smallDecisionBody, startTinyServe, type TinyServe } from "../helpers/hostile.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

let serve: TinyServe;
beforeAll(async () => {
  serve = await startTinyServe("connect-bodies", TINY_MODEL_DIR);
}, 90_000);
afterAll(async () => {
  await serve?.close();
});

/** A decision body as Connect's JSON codec reads it (the question type by its enum name). */
const asConnectJson = (body: string) => body.replaceAll('"type":"noul"', '"type":"QUESTION_TYPE_NOUL"');

async function decideOverConnect(body: string) {
  const res = await fetch(`${serve.url}/tessera.decision.v1.DecisionService/Decide`, {
    method: "POST",
    headers: { authorization: `Bearer ${serve.key}`, "content-type": "application/json" },
    body,
  });
  return { status: res.status, text: await res.text() };
}

describe("Decide over Connect", () => {
  it("three 7 MB ones are refused before they are parsed, /healthz answering within 1 s", { timeout: 120_000 }, async () => {
    const body = asConnectJson(objectStateDecisionBody(7_000_000));
    expect(body.length).toBeGreaterThan(7_000_000);
    const decisions = Promise.all([0, 1, 2].map(() => decideOverConnect(body)));
    const [health] = await probeWhile(serve.url, ["/healthz"], decisions, 50);
    const answers = await decisions;
    console.log(`three 7 MB Decide over Connect: /healthz slowest ${health!.maxMs} ms over ${health!.tries} probes`);
    for (const answer of answers) {
      expect(answer.status, answer.text.slice(0, 300)).toBe(429);
      expect(answer.text).toMatch(/resource_exhausted.*readMaxBytes 2097152/);
    }
    expect(health!.failures).toBe(0);
    expect(health!.maxMs).toBeLessThanOrEqual(1_000);
  });

  it("one within the bound is answered", { timeout: 60_000 }, async () => {
    const answer = await decideOverConnect(asConnectJson(smallDecisionBody(2)));
    expect(answer.status, answer.text.slice(0, 300)).toBe(200);
    expect(JSON.parse(answer.text).answers).toBeDefined();
  });
});
