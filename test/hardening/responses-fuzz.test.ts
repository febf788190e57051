// Property-based fuzzing of POST /v1/responses over real HTTP, against a Tessera in its own
// process: never a 5xx, never a crash, always the documented shape (a `response` object, its
// numbered SSE events ending with a terminal one, or an OpenAI error). As fuzz.test.ts: a worker
// without a model for the many runs, then fewer through the tiny model's real engine.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keepAliveClient, type Reply } from "./http-client.js";
import { bodyCase, toText, type BodyCase } from "./json-arbitraries.js";
import { responsesBody, validResponsesBody } from "./responses-arbitraries.js";
import { spawnTessera, type TesseraProcess } from "./server-process.js";
import { checkResponses } from "./shapes.js";

const RUNS = Number(process.env["FUZZ_RUNS"] ?? 2_000);
const SEED = process.env["FUZZ_SEED"] === undefined ? undefined : Number(process.env["FUZZ_SEED"]);

function expectShape(problem: string | undefined, reply: Reply, c: BodyCase): void {
  if (problem !== undefined) {
    const sent = `${c.damage} ${c.contentType ?? "(no content-type)"}: ${c.body.subarray(0, 300).toString("latin1")}`;
    throw new Error(`${sent}: ${problem}\nstatus ${reply.status}, body ${reply.body.subarray(0, 400).toString("utf8")}`);
  }
}

async function fuzz(server: TesseraProcess, runs: number, bodies: fc.Arbitrary<BodyCase>): Promise<Map<number, number>> {
  const client = keepAliveClient(server.url);
  const statuses = new Map<number, number>();
  try {
    await fc.assert(
      fc.asyncProperty(bodies, async (c) => {
        const headers: Record<string, string> = { authorization: `Bearer ${server.key}` };
        if (c.contentType !== undefined) headers["content-type"] = c.contentType;
        const reply = await client.send({ method: "POST", path: "/v1/responses", headers, body: c.body });
        expectShape(checkResponses(reply), reply, c);
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
      }),
      { numRuns: runs, seed: SEED, endOnFailure: false },
    );
    expect(server.exited).toBeUndefined();
    expect((await client.send({ path: "/healthz" })).status).toBe(200);
  } finally {
    client.close();
  }
  return statuses;
}

describe("fuzzing POST /v1/responses", () => {
  let fake: TesseraProcess;
  let tiny: TesseraProcess;

  beforeAll(async () => {
    const env = { TESSERA_DEFAULT_RPM: "1000000000", TESSERA_LOG_LEVEL: "warn", TESSERA_PLAYGROUND: "off" };
    [fake, tiny] = await Promise.all([
      spawnTessera({ models: "none", fakeWorker: { slots: 4, queue: 64 }, env }),
      spawnTessera({ models: "tiny", env }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([fake?.close(), tiny?.close()]);
  });

  it(`${RUNS} generated bodies against a model-less worker: never a 5xx, always the documented shape`, async () => {
    const statuses = await fuzz(fake, RUNS, bodyCase(responsesBody()));
    console.log(`responses fuzz: ${JSON.stringify(Object.fromEntries(statuses))}`);
    // A good share went all the way through to a generation, and a good share was refused.
    expect(statuses.get(200) ?? 0).toBeGreaterThan(RUNS / 5);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(RUNS / 5);
    const state = await fake.state();
    expect(state.polluted).toEqual([]);
  }, 300_000);

  it(`${Math.ceil(RUNS / 40)} bodies through the tiny model's real engine, valid ones answered 200`, async () => {
    const runs = Math.max(20, Math.ceil(RUNS / 40));
    const statuses = await fuzz(tiny, runs, bodyCase(responsesBody()));
    // Every valid body, undamaged, is answered 200 by the real engine, streamed or not.
    const undamaged = validResponsesBody().map(
      (document): BodyCase => ({
        contentType: "application/json",
        body: Buffer.from(toText(document)),
        damage: "none",
      }),
    );
    const valid = await fuzz(tiny, runs, undamaged);
    expect([...valid.keys()]).toEqual([200]);
    console.log(`responses tiny fuzz: ${JSON.stringify({ hostile: Object.fromEntries(statuses), valid: Object.fromEntries(valid) })}`);
    const state = await tiny.state();
    expect(state.polluted).toEqual([]);
    expect(state.logs.filter((line) => /"level":"(error|fatal)"/.test(line))).toEqual([]);
  }, 300_000);
});
