import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../logger.js";
import { startNatsServer, type NatsServerHandle } from "../../test/nats/nats-server.js";
import { connectNats, type NatsLink } from "./connection.js";
import { createNatsStore } from "./kv-store.js";
import { natsUsageSink } from "./usage-stream.js";
import { create } from "@bufbuild/protobuf";
import { SettleRequestSchema, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";

let server: NatsServerHandle;
let link: NatsLink;

beforeAll(async () => {
  server = await startNatsServer();
  link = await connectNats({ url: server.url, name: "outage-test", logger: silentLogger(), reconnectWaitMs: 100 });
});
afterAll(async () => {
  await link?.close();
  await server?.dispose();
});

async function until(check: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function failure(work: Promise<unknown>) {
  const started = Date.now();
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { err: err as ConnectError, ms: Date.now() - started };
}

describe("NATS going away and coming back", () => {
  it("fails KV work and usage publishes at once with Unavailable while NATS is down, and recovers with the same handles", async () => {
    const store = createNatsStore(link.nc, { bucketPrefix: "outage", timeoutMs: 1_000, connected: link.connected });
    const bucket = store.bucket<{ n: number }>("things");
    const revision = await bucket.create("a", { n: 1 });
    const sink = natsUsageSink(link.nc, { connected: link.connected });
    const event = create(SettleRequestSchema, { keyId: "key_x", requestId: "r1", kind: UsageKind.TEXT });

    await server.stop();
    await until(() => !link.connected());
    // A bucket first used while NATS is away opens once it is back.
    const late = store.bucket<{ n: number }>("late");
    for (const work of [bucket.get("a"), bucket.update("a", { n: 2 }, revision), late.put("x", { n: 1 }), sink.publish(event)]) {
      const { err, ms } = await failure(work);
      expect(err).toBeInstanceOf(ConnectError);
      expect(err.code).toBe(Code.Unavailable);
      expect(ms).toBeLessThan(500); // well under the 1 s KV timeout: refused at once, not timed out
    }
    expect(() => link.ensureConnected()).toThrow(/NATS is unreachable/);

    await server.start();
    await until(() => link.connected());
    // JetStream may take a moment after the server is back: retry briefly.
    let value: { n: number } | undefined;
    for (let i = 0; i < 50 && value === undefined; i++) {
      value = await bucket.get("a").then(
        (e) => e?.value,
        () => undefined,
      );
      if (value === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    expect(value).toEqual({ n: 1 });
    expect(await bucket.update("a", { n: 2 }, revision)).toBeGreaterThan(revision);
    await late.put("x", { n: 1 });
    expect((await late.get("x"))?.value).toEqual({ n: 1 });
  });
});
