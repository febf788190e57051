import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { silentLogger } from "../logger.js";
import { createMetrics } from "../metrics.js";
import { connectTransport } from "./clients.js";
import { startServiceServer, type ServiceServer } from "./service-server.js";

const servers: ServiceServer[] = [];
afterEach(async () => {
  while (servers.length > 0) await servers.pop()!.close(500);
});

async function start(options: { ready?: () => true | string; slowMs?: number } = {}) {
  const metrics = createMetrics({ processMetrics: false });
  const server = await startServiceServer({
    host: "127.0.0.1",
    port: 0,
    routes: (router) =>
      router.service(RegistryService, {
        async listWorkers() {
          if (options.slowMs !== undefined) await new Promise((r) => setTimeout(r, options.slowMs));
          return { workers: [{ id: "w1", address: "http://w1" }] };
        },
        resolveModel(req) {
          throw new ConnectError(`model "${req.model}" does not exist`, Code.NotFound);
        },
      }),
    readiness: [{ name: "thing", check: options.ready ?? (() => true) }],
    metrics,
    logger: silentLogger(),
  });
  servers.push(server);
  return { server, metrics };
}

describe("startServiceServer", () => {
  it("serves Connect over h2c, gRPC, and gRPC-Web and probes over HTTP/1.1 on one port", async () => {
    const { server } = await start();
    const overConnect = createClient(RegistryService, connectTransport(server.url));
    expect((await overConnect.listWorkers({})).workers[0]!.id).toBe("w1");
    const overGrpc = createClient(RegistryService, createGrpcTransport({ baseUrl: server.url }));
    expect((await overGrpc.listWorkers({})).workers[0]!.address).toBe("http://w1");
    const overGrpcWeb = createClient(RegistryService, createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    expect((await overGrpcWeb.listWorkers({})).workers).toHaveLength(1);
    const err = await overGrpc.resolveModel({ model: "nope" }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.NotFound);

    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    // Connect's JSON over plain HTTP/1.1 (curl).
    const viaCurl = await fetch(`${server.url}/tessera.registry.v1.RegistryService/ListWorkers`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(await viaCurl.json()).toEqual({ workers: [{ id: "w1", address: "http://w1" }] });
    expect((await fetch(`${server.url}/nope`)).status).toBe(404);
  });

  it("answers /readyz 503 naming what is not ready, and counts calls in /metrics", async () => {
    let ready: true | string = "store unreachable";
    const { server } = await start({ ready: () => ready });
    const notReady = await fetch(`${server.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ status: "not ready", checks: { thing: "store unreachable" } });
    ready = true;
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);

    await createClient(RegistryService, connectTransport(server.url)).listWorkers({});
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(
      /tessera_http_requests_total\{method="POST",route="\/tessera.registry.v1.RegistryService\/ListWorkers",status="200"\} 1/,
    );
  });

  it("lets calls in flight finish when it closes, then refuses connections", async () => {
    const { server } = await start({ slowMs: 300 });
    const client = createClient(RegistryService, connectTransport(server.url));
    await client.listWorkers({}); // an idle HTTP/2 connection stays open
    await fetch(`${server.url}/healthz`); // and an idle HTTP/1.1 keep-alive one
    const inFlight = client.listWorkers({});
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await server.close(5_000);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect((await inFlight).workers).toHaveLength(1);
    const err = await createClient(RegistryService, connectTransport(server.url))
      .listWorkers({})
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unavailable);
  });
});
