// `tessera serve <names>` wired in this test process: services named together share a
// process (in-process calls), the rest are reached over Connect and NATS.
import { createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { distributedConfigProblems } from "../../bin/distributed.js";
import { loadConfig } from "../../lib/config.js";
import { connectTransport } from "../../lib/remote/clients.js";
import { type DistributedHarness, startDistributedHarness, TINY_MODEL_ENTRY } from "../helpers/distributed.js";
import { TEST_SERVING_ID } from "../helpers/tessera.js";

let cluster: DistributedHarness;

beforeAll(async () => {
  cluster = await startDistributedHarness("distributed", {
    models: [
      { id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "t", ...TINY_MODEL_ENTRY },
      { id: "decisionmodel-0.1", kind: "decision", family: "decisionmodel", version: "0.1", description: "d", ...TINY_MODEL_ENTRY },
    ],
    latest: [{ id: "decisionmodel-latest", family: "decisionmodel", aliases: ["jev-latest"] }],
  });
});
afterAll(async () => {
  await cluster?.close();
});

describe("distributed mode in one process per service group", () => {
  it("names every missing address at once", () => {
    const problems = distributedConfigProblems(loadConfig({ env: {} }), ["gateway", "decision"]);
    expect(problems).toHaveLength(3);
    expect(problems.join("\n")).toMatch(/TESSERA_NATS_URL/);
    expect(problems.join("\n")).toMatch(/TESSERA_ACCOUNTING_URL: the gateway needs the accounting service/);
    expect(problems.filter((p) => p.startsWith("TESSERA_REGISTRY_URL"))).toHaveLength(1);
    expect(distributedConfigProblems(cluster.config(), ["inference"])).toEqual([]);
  });

  it("runs a worker in one process and everything else in another: it is announced, listed and answers", async () => {
    const worker = await cluster.start(["inference"], { TESSERA_WORKER_ID: "w-1" });
    expect(worker.advertisedUrl).toBe(worker.url);
    const front = await cluster.start(["gateway", "accounting", "registry", "decision"], { TESSERA_WORKER_ID: "front" });

    // The worker's own port: internal Connect (no key), probes.
    expect((await fetch(`${worker.url}/readyz`)).status).toBe(200);
    const headers = { authorization: `Bearer ${cluster.key}`, "content-type": "application/json" };
    const listed = async () =>
      ((await (await fetch(`${front.url}/v1/models`, { headers })).json()) as { models: { name: string }[] }).models.map((m) => m.name);
    const end = Date.now() + 5_000;
    while ((await listed()).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(await listed()).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1"]);

    const chat = await fetch(`${front.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
    expect(chat.status).toBe(200);
    const decision = await fetch(`${front.url}/v1/systemone`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "jev-latest", state: "hello", questions: { q: { type: "noul" } } }),
    });
    expect(decision.status).toBe(200);
    expect((await fetch(`${front.url}/readyz`)).status).toBe(200);

    // Withdrawn at shutdown: the listing empties at once, not after the heartbeat expires.
    await worker.close();
    const gone = Date.now() + 2_000;
    while ((await listed()).length > 0 && Date.now() < gone) await new Promise((r) => setTimeout(r, 20));
    expect(await listed()).toEqual([]);
  });

  it("serves the registry's workers to other processes over Connect", async () => {
    const registry = await cluster.start(["registry"]);
    const worker = await cluster.start(["inference"], { TESSERA_WORKER_ID: "w-2" });
    const client = createClient(RegistryService, connectTransport(registry.url));
    const end = Date.now() + 5_000;
    let workers = (await client.listWorkers({})).workers;
    while (!workers.some((w) => w.id === "w-2") && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50));
      workers = (await client.listWorkers({})).workers;
    }
    expect(workers.find((w) => w.id === "w-2")).toMatchObject({ address: worker.url, models: [TEST_SERVING_ID] });
  });
});
