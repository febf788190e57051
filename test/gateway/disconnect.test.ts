import { request } from "node:http";
import { describe, expect, it } from "vitest";
import type { Route } from "../../gateway/route.js";
import { useBareGateway } from "../helpers/bare-gateway.js";

// The gateway alone, with one route that waits until its client goes away.
const aborted: unknown[] = [];
const waitsForAbort: Route = {
  method: "GET",
  path: "/wait",
  errorStyle: "detail",
  body: "none",
  handle: (ctx) =>
    new Promise((_, reject) => {
      ctx.signal.addEventListener("abort", () => {
        aborted.push(ctx.signal.reason);
        reject(ctx.signal.reason);
      });
    }),
};
const gateway = useBareGateway({ routes: [waitsForAbort], accounting: {} as never });
const logs = gateway.logs;

describe("a client that disconnects", () => {
  it("aborts its handler's signal and is logged as 499", async () => {
    const req = request(`${gateway.base}/wait`);
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
