import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type NatsServerHandle } from "../../test/nats/nats-server.js";
import { createNatsWorkerDirectory } from "./worker-directory.js";

let server: NatsServerHandle;
const connections: NatsConnection[] = [];

beforeAll(async () => {
  server = await startNatsServer();
});
afterAll(async () => {
  for (const nc of connections) await nc.close();
  await server?.dispose();
});

async function client() {
  const nc = await connect({ servers: server.url });
  connections.push(nc);
  return nc;
}

async function until(check: () => boolean, ms = 3_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("NATS worker directory", () => {
  it("sees other processes' workers, least loaded first, and forgets silent or withdrawn ones", async () => {
    let now = 1_000_000;
    const router = createNatsWorkerDirectory(await client(), { ttlMs: 3_000, clock: () => now });
    const workerA = createNatsWorkerDirectory(await client());
    const workerB = createNatsWorkerDirectory(await client());

    workerA.publish({ id: "a", address: "http://127.0.0.1:1", models: ["m"], slotsTotal: 4, slotsFree: 1 });
    workerB.publish({ id: "b", address: "http://127.0.0.1:2", models: ["m"], slotsTotal: 4, slotsFree: 3 });
    await until(() => router.live().length === 2);
    expect(router.live().map((w) => w.id)).toEqual(["b", "a"]);

    workerB.withdraw("b");
    await until(() => router.live().length === 1);
    expect(router.live()[0]!.id).toBe("a");

    now += 3_001;
    expect(router.live()).toEqual([]);
    await Promise.all([router.close(), workerA.close(), workerB.close()]);
  });

  it("ignores malformed heartbeats", async () => {
    const nc = await client();
    const router = createNatsWorkerDirectory(nc);
    nc.publish("tessera.workers.heartbeat", "{not json");
    nc.publish("tessera.workers.heartbeat", JSON.stringify({ id: 5 }));
    await nc.flush();
    await new Promise((r) => setTimeout(r, 100));
    expect(router.live()).toEqual([]);
    await router.close();
  });
});
