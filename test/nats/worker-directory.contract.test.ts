import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll } from "vitest";
import { createInProcessWorkerDirectory } from "../../lib/heartbeats/in-process.js";
import { createNatsWorkerDirectory } from "../../lib/nats/worker-directory.js";
import { startNatsServer, type NatsServerHandle } from "./nats-server.js";
import { runWorkerDirectoryContract } from "./worker-directory-contract.js";

let server: NatsServerHandle;
beforeAll(async () => {
  server = await startNatsServer();
});
afterAll(async () => {
  await server?.dispose();
});

runWorkerDirectoryContract("in-process (embedded)", async ({ ttlMs, clock }) => {
  const directory = createInProcessWorkerDirectory({ ttlMs, clock });
  return { publisher: directory, observer: directory, close: () => directory.close() };
});

runWorkerDirectoryContract("NATS (a worker and a router in two processes)", async ({ ttlMs, clock }) => {
  const connections: NatsConnection[] = [await connect({ servers: server.url }), await connect({ servers: server.url })];
  const publisher = createNatsWorkerDirectory(connections[0]!, { ttlMs, clock });
  const observer = createNatsWorkerDirectory(connections[1]!, { ttlMs, clock });
  await connections[1]!.flush(); // the observer's subscriptions are in place
  return {
    publisher,
    observer,
    async close() {
      await publisher.close();
      await observer.close();
      for (const nc of connections) await nc.close();
    },
  };
});
