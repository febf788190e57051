import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Route } from "../../gateway/route.js";
import { createGatewayHandler, createGatewayServer } from "../../gateway/server.js";
import { createLogger } from "../../lib/logger.js";
import { createMetrics } from "../../lib/metrics.js";

// The gateway alone, with one route that waits until its client goes away.
const aborted: unknown[] = [];
const logs: string[] = [];
const waitsForAbort: Route = {
  method: "GET",
  path: "/wait",
  errorStyle: "detail",
  auth: "none",
  body: "none",
  handle: (ctx) =>
    new Promise((_, reject) => {
      ctx.signal.addEventListener("abort", () => {
        aborted.push(ctx.signal.reason);
        reject(ctx.signal.reason);
      });
    }),
};
const server = createGatewayServer(
  createGatewayHandler({
    routes: [waitsForAbort],
    accounting: {} as never,
    logger: createLogger({
      level: "info",
      destination: new Writable({
        write(chunk: Buffer, _enc, done) {
          logs.push(...chunk.toString().split("\n").filter(Boolean));
          done();
        },
      }),
    }),
    metrics: createMetrics({ processMetrics: false }),
  }),
);
let base = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("a client that disconnects", () => {
  it("aborts its handler's signal and is logged as 499", async () => {
    const req = request(`${base}/wait`);
    req.on("error", () => undefined);
    req.end();
    await new Promise((resolve) => setTimeout(resolve, 100));
    req.destroy();
    for (let i = 0; i < 50 && aborted.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(aborted).toHaveLength(1);
    expect((aborted[0] as Error).name).toBe("ClientGone");
    await new Promise((resolve) => setTimeout(resolve, 50));
    const line = logs.map((l) => JSON.parse(l) as { msg: string; route: string; status: number }).find((l) => l.msg === "request");
    expect(line).toMatchObject({ route: "/wait", status: 499 });
  });
});
