// `tessera serve <names>` wired in this test process: services named together share a
// process (in-process calls), the rest are reached over Connect and NATS.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { distributedConfigProblems, startDistributed, type DistributedTessera } from "../../bin/distributed.js";
import { loadConfig } from "../../lib/config.js";
import { silentLogger } from "../../lib/logger.js";
import { connectTransport } from "../../lib/remote/clients.js";
import { newApiKey, TEST_SERVING_ID, TINY_MODEL_DIR } from "../helpers/tessera.js";
import { startNatsServer, type NatsServerHandle } from "./nats-server.js";

let server: NatsServerHandle;
let scratch: string;
const running: DistributedTessera[] = [];
const key = newApiKey();

function config(env: Record<string, string>) {
  return loadConfig({
    env: {
      TESSERA_HOST: "127.0.0.1",
      TESSERA_PORT: "0",
      TESSERA_NATS_URL: server.url,
      TESSERA_MODELS_CONFIG: join(scratch, "models.config.json"),
      TESSERA_BOOTSTRAP_KEY: key,
      TESSERA_ADMIN_TOKEN: "admin-token-for-this-test-0001",
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_SHUTDOWN_TIMEOUT_MS: "1000",
      ...env,
    },
  });
}

beforeAll(async () => {
  server = await startNatsServer();
  scratch = mkdtempSync(join(tmpdir(), "tessera-distributed-"));
  const common = { release_date: "2026-11-22", model_dir: TINY_MODEL_DIR, serving_id: TEST_SERVING_ID };
  writeFileSync(
    join(scratch, "models.config.json"),
    JSON.stringify({
      models: [
        { id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "t", ...common },
        { id: "decisionmodel-0.1", kind: "decision", family: "decisionmodel", version: "0.1", description: "d", ...common },
      ],
      latest: [{ id: "decisionmodel-latest", family: "decisionmodel", aliases: ["jev-latest"] }],
    }),
  );
});
afterAll(async () => {
  for (const app of running.reverse()) await app.close();
  await server?.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

describe("distributed mode in one process per service group", () => {
  it("names every missing address at once", () => {
    const problems = distributedConfigProblems(loadConfig({ env: {} }), ["gateway", "decision"]);
    expect(problems).toHaveLength(3);
    expect(problems.join("\n")).toMatch(/TESSERA_NATS_URL/);
    expect(problems.join("\n")).toMatch(/TESSERA_ACCOUNTING_URL: the gateway needs the accounting service/);
    expect(problems.filter((p) => p.startsWith("TESSERA_REGISTRY_URL"))).toHaveLength(1);
    expect(distributedConfigProblems(config({}), ["inference"])).toEqual([]);
  });

  it("runs a worker in one process and everything else in another: it is announced, listed and answers", async () => {
    const worker = await startDistributed({
      config: config({ TESSERA_WORKER_ID: "w-1" }),
      logger: silentLogger(),
      services: ["inference"],
    });
    running.push(worker);
    expect(worker.advertisedUrl).toBe(worker.url);
    const front = await startDistributed({
      config: config({ TESSERA_WORKER_ID: "front" }),
      logger: silentLogger(),
      services: ["gateway", "accounting", "registry", "decision"],
    });
    running.push(front);

    // The worker's own port: internal Connect (no key), probes.
    expect((await fetch(`${worker.url}/readyz`)).status).toBe(200);
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
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
    const registry = await startDistributed({ config: config({}), logger: silentLogger(), services: ["registry"] });
    running.push(registry);
    const worker = await startDistributed({
      config: config({ TESSERA_WORKER_ID: "w-2" }),
      logger: silentLogger(),
      services: ["inference"],
    });
    running.push(worker);
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
