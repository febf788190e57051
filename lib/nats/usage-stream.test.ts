import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SettleRequestSchema, UsageKind, type SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { useNats } from "../../test/nats/nats-server.js";
import { silentLogger } from "../logger.js";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { ensureUsageStream, natsUsageSink, startUsageConsumer, USAGE_STREAM, USAGE_SUBJECT, usageAckWaitMs } from "./usage-stream.js";

const logger = silentLogger();
const nats = useNats({ usageStream: true });

const event = (requestId: string, completionTokens: number): SettleRequest =>
  create(SettleRequestSchema, {
    keyId: "key_1",
    requestId,
    kind: UsageKind.TEXT,
    usage: { promptTokens: 10n, completionTokens: BigInt(completionTokens) },
  });

async function until(check: () => boolean, ms = 5_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("usage stream", () => {
  it("delivers each request id once, even when published twice", async () => {
    const seen: string[] = [];
    const consumer = startUsageConsumer(nats.nc, async (e) => void seen.push(e.requestId), logger);
    const sink = natsUsageSink(nats.nc);
    await sink.publish(event("req-a", 5));
    await sink.publish(event("req-a", 5));
    await sink.publish(event("req-b", 7));
    await until(() => seen.length >= 2);
    await new Promise((r) => setTimeout(r, 300));
    await consumer.stop();
    expect(seen.sort()).toEqual(["req-a", "req-b"]);
  });

  it("redelivers an event whose settlement failed, and acks it once settled", async () => {
    let attempts = 0;
    const settled: SettleRequest[] = [];
    const consumer = startUsageConsumer(
      nats.nc,
      async (e) => {
        attempts += 1;
        if (attempts === 1) throw new Error("accounting store unavailable");
        settled.push(e);
      },
      logger,
    );
    await natsUsageSink(nats.nc).publish(event("req-c", 3));
    await until(() => settled.length === 1);
    await consumer.stop();
    expect(attempts).toBe(2);
    expect(settled[0]!.usage!.completionTokens).toBe(3n);

    // Nothing is left for a second consumer: the acked event is gone from the work queue.
    const again: string[] = [];
    const second = startUsageConsumer(nats.nc, async (e) => void again.push(e.requestId), logger);
    await new Promise((r) => setTimeout(r, 500));
    await second.stop();
    expect(again).toEqual([]);
  });

  it("sets the consumer's ack wait, also on an existing consumer (TESSERA_USAGE_ACK_WAIT_MS)", async () => {
    await ensureUsageStream(nats.nc, { ackWaitMs: 5_000 });
    expect(await usageAckWaitMs(nats.nc)).toBe(5_000);
    await ensureUsageStream(nats.nc, { ackWaitMs: 7_000 });
    expect(await usageAckWaitMs(nats.nc)).toBe(7_000);
    await ensureUsageStream(nats.nc);
    expect(await usageAckWaitMs(nats.nc)).toBe(7_000);
  });

  it("settles events concurrently, and drops a malformed one instead of redelivering it forever", async () => {
    let active = 0;
    let most = 0;
    const settled: string[] = [];
    const consumer = startUsageConsumer(
      nats.nc,
      async (e) => {
        active += 1;
        most = Math.max(most, active);
        await new Promise((r) => setTimeout(r, 50));
        active -= 1;
        settled.push(e.requestId);
      },
      logger,
      { concurrency: 8 },
    );
    await jetstream(nats.nc).publish(`${USAGE_SUBJECT}.1`, new Uint8Array([0xff, 0xff, 0xff]), { msgID: "garbage" });
    const sink = natsUsageSink(nats.nc);
    for (let i = 0; i < 16; i++) await sink.publish(event(`req-par-${i}`, i));
    await until(() => settled.length === 16);
    await new Promise((r) => setTimeout(r, 300));
    await consumer.stop();
    expect(settled.sort()).toEqual(Array.from({ length: 16 }, (_, i) => `req-par-${i}`).sort());
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(8);
    // Nothing is left in the work queue: the malformed event was terminated, not left to redeliver.
    const info = await (await jetstreamManager(nats.nc)).streams.info(USAGE_STREAM);
    expect(info.state.messages).toBe(0);
  });
});
