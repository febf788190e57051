import { Agent, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
});
afterAll(async () => {
  await tessera?.close();
});

function get(url: string, key: string, agent: Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the per-minute limit under concurrency", () => {
  it("admits exactly 60 of 200 parallel requests on a key limited to 60 per minute", async () => {
    tessera.announceWorker();
    const key = await tessera.createKey({ rpm: 60 });
    await roomInThisMinute(15_000);
    // One connection per request, all opened at once.
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const statuses = await Promise.all(Array.from({ length: 200 }, () => get(`${tessera.url}/v1/models`, key.apiKey, agent)));
    agent.destroy();
    const counts = new Map<number, number>();
    for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual({ 200: 60, 429: 140 });
    // Another key is not affected.
    const other = await tessera.fetch("/v1/models");
    expect(other.status).toBe(200);
  });
});
