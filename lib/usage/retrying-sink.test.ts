import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { SettleRequestSchema, UsageKind, type SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createLogger } from "../logger.js";
import { Writable } from "node:stream";
import { settleThroughSink, type RequestPathAccounting } from "./gate.js";
import { retryingUsageSink } from "./retrying-sink.js";
import type { UsageSink } from "./sink.js";

function capture() {
  const lines: string[] = [];
  const logger = createLogger({
    level: "info",
    destination: new Writable({
      write(chunk: Buffer, _e, done) {
        lines.push(...chunk.toString().split("\n").filter(Boolean));
        done();
      },
    }),
  });
  return { logger, lines };
}

/** A stream that refuses while `down` and records what it stored. */
function flakyStream() {
  const state = { down: false, stored: [] as string[] };
  const sink: UsageSink = {
    async publish(event) {
      if (state.down) throw new ConnectError("NATS is unreachable", Code.Unavailable);
      state.stored.push(event.requestId);
    },
  };
  return { state, sink };
}

const event = (requestId: string): SettleRequest =>
  create(SettleRequestSchema, { keyId: "key_1", requestId, kind: UsageKind.DECISION, usage: { inputTokens: 7n } });

describe("retryingUsageSink", () => {
  it("answers at once while the stream is away and publishes the kept events once it is back", async () => {
    const { state, sink: inner } = flakyStream();
    const { logger, lines } = capture();
    const sink = retryingUsageSink(inner, { logger, retryMs: 20 });
    await sink.publish(event("a"));
    state.down = true;
    await sink.publish(event("b"));
    await sink.publish(event("c"));
    await sink.publish(event("c")); // the same request again is kept once
    expect(sink.pending()).toBe(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(state.stored).toEqual(["a"]);
    state.down = false;
    const end = Date.now() + 2_000;
    while (sink.pending() > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(state.stored).toEqual(["a", "b", "c"]);
    expect(lines.join("\n")).toMatch(/usage stream unavailable/);
  });

  it("at shutdown, tries for a while and logs by request id (never the key) what could not be published", async () => {
    const { state, sink: inner } = flakyStream();
    const { logger, lines } = capture();
    const sink = retryingUsageSink(inner, { logger, retryMs: 10 });
    state.down = true;
    await sink.publish(event("lost"));
    await sink.flush(50);
    logger.flush();
    await new Promise((r) => setTimeout(r, 20));
    expect(lines.some((l) => l.includes('"usage event not published before shutdown"') && l.includes('"requestId":"lost"'))).toBe(true);
  });
});

describe("settleThroughSink", () => {
  it("sends Settle to the sink and everything else to accounting", async () => {
    const calls: string[] = [];
    const accounting = {
      authenticate: async () => {
        calls.push("authenticate");
        return {};
      },
      admit: async () => {
        calls.push("admit");
        return {};
      },
      settle: async () => {
        calls.push("settle");
        return {};
      },
    } as unknown as RequestPathAccounting;
    const published: SettleRequest[] = [];
    const gate = settleThroughSink(accounting, { publish: async (e) => void published.push(e) });
    await gate.authenticate({ apiKey: "tsr_x" });
    await gate.admit({ keyId: "key_1" });
    const answer = await gate.settle({ keyId: "key_1", requestId: "r", kind: UsageKind.TEXT, usage: { promptTokens: 3n } });
    expect(calls).toEqual(["authenticate", "admit"]);
    expect(published).toHaveLength(1);
    expect(published[0]!.usage?.promptTokens).toBe(3n);
    expect(answer.alreadySettled).toBe(false);
  });
});
