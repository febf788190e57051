// The service over real HTTP: connect-node adapter on port 0, clients speaking Connect and gRPC.
import { createServer as createHttp2Server, type Http2Server, type Http2Session } from "node:http2";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { AccountingService, RateLimitedSchema } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createMemoryStore } from "../../lib/store/index.js";
import { accountingRoutes } from "./server.js";
import { silentLogger } from "../../test/helpers/accounting-harness.js";

const deps = () => ({ store: createMemoryStore(), logger: silentLogger, defaultRequestsPerMinute: 2 });
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function listen(server: Server | Http2Server): Promise<number> {
  // HTTP/2 clients keep their session open; end those so that close() can finish.
  const sessions = new Set<Http2Session>();
  server.on("session", (session: Http2Session) => sessions.add(session));
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
    closers.push(
      () =>
        new Promise<void>((done) => {
          server.close(() => done());
          for (const session of sessions) session.destroy();
          if ("closeAllConnections" in server) server.closeAllConnections();
        }),
    );
  });
}

describe("accounting over HTTP", () => {
  it("serves Connect over HTTP/1.1, with error codes and details", async () => {
    const port = await listen(createServer(connectNodeAdapter({ routes: accountingRoutes(deps()) })));
    const client = createClient(AccountingService, createConnectTransport({ baseUrl: `http://127.0.0.1:${port}`, httpVersion: "1.1" }));
    const { apiKey, key } = await client.createKey({ name: "http" });
    expect((await client.authenticate({ apiKey })).principal!.keyId).toBe(key!.keyId);
    await client.admit({ keyId: key!.keyId });
    await client.admit({ keyId: key!.keyId });
    const err = await client.admit({ keyId: key!.keyId }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
    expect((err as ConnectError).findDetails(RateLimitedSchema)[0]!.limit).toBe(2);
    const unauth = await client.authenticate({ apiKey: "tsr_wrong" }).catch((e: unknown) => ConnectError.from(e));
    expect((unauth as ConnectError).code).toBe(Code.Unauthenticated);
  });

  it("serves gRPC over HTTP/2", async () => {
    const port = await listen(createHttp2Server(connectNodeAdapter({ routes: accountingRoutes(deps()) })));
    const client = createClient(AccountingService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
    const { apiKey } = await client.createKey({});
    expect((await client.authenticate({ apiKey })).principal!.keyId).toMatch(/^key_/);
    const { keys } = await client.listKeys({});
    expect(keys).toHaveLength(1);
  });
});
