import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll } from "vitest";
import { startNatsServer, type NatsServerHandle } from "../../test/nats/nats-server.js";
import { runStoreContract } from "../store/contract.js";
import { createNatsStore } from "./kv-store.js";

let server: NatsServerHandle;
let nc: NatsConnection;
let run = 0;

beforeAll(async () => {
  server = await startNatsServer();
  nc = await connect({ servers: server.url });
});

afterAll(async () => {
  await nc?.drain();
  await server?.dispose();
});

// Every store gets buckets of its own (a fresh prefix), as the contract wants an empty store.
runStoreContract("nats", () => createNatsStore(nc, { bucketPrefix: `t${++run}` }), { ttlClock: "real" });
