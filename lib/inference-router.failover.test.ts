import { Code, ConnectError, createRouterTransport, type Transport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { InferenceService, OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import { createInProcessWorkerDirectory } from "./heartbeats/in-process.js";
import { createInferenceRouter, isOverloaded } from "./inference-router.js";

const refused = () => {
  const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
  return new ConnectError("connect ECONNREFUSED 127.0.0.1:1", Code.Unavailable, undefined, undefined, cause);
};

/** A worker that is gone: every call fails as a refused connection would. */
const deadWorker = (calls: { n: number }): Transport => ({
  async unary() {
    calls.n += 1;
    throw refused();
  },
  async stream() {
    calls.n += 1;
    throw refused();
  },
});

/** A worker answering with its name; `breakAfter` events into a stream, the connection breaks. */
function worker(name: string, options: { overloaded?: boolean; breakAfter?: number } = {}) {
  return createRouterTransport((router) =>
    router.service(InferenceService, {
      countTokens() {
        if (options.overloaded)
          throw new ConnectError("full", Code.ResourceExhausted, undefined, [{ desc: OverloadedSchema, value: { retryAfterSeconds: 1 } }]);
        return { tokens: name.length };
      },
      async *generate(req) {
        if (options.overloaded)
          throw new ConnectError("full", Code.ResourceExhausted, undefined, [{ desc: OverloadedSchema, value: { retryAfterSeconds: 1 } }]);
        for (let i = 0; i < 3; i++) {
          if (options.breakAfter === i) throw new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
          yield { event: { case: "started", value: { model: req.model, workerId: `${name}${i}`, promptTokens: 0 } } };
        }
      },
    }),
  );
}

async function collect(stream: AsyncIterable<{ event: { case: string | undefined; value?: unknown } }>) {
  const ids: string[] = [];
  for await (const e of stream) if (e.event.case === "started") ids.push((e.event.value as { workerId: string }).workerId);
  return ids;
}

describe("createInferenceRouter: failover", () => {
  it("skips a worker it cannot reach, for unary calls and streams, and tries it last until it beats again", async () => {
    const workers = createInProcessWorkerDirectory();
    const dead = { n: 0 };
    const transports: Record<string, Transport> = { a: deadWorker(dead), b: worker("bb") };
    const inferenceFor = createInferenceRouter({ workers, transportFor: (w) => transports[w.id]! });
    workers.publish({ id: "a", address: "http://a", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    workers.publish({ id: "b", address: "http://b", models: ["m"], slotsTotal: 4, slotsFree: 1 });

    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(2);
    expect(dead.n).toBe(1);
    // Marked: the next calls go to b first, although a still looks least loaded.
    expect(await collect(inferenceFor("m").generate({ model: "m" }))).toEqual(["bb0", "bb1", "bb2"]);
    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(2);
    expect(dead.n).toBe(1);

    // A new heartbeat from a puts it first again.
    await new Promise((r) => setTimeout(r, 5));
    workers.publish({ id: "a", address: "http://a", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(2);
    expect(dead.n).toBe(2);
  });

  it("sends a stream refused as Overloaded to the next worker; Overloaded only when all are full", async () => {
    const workers = createInProcessWorkerDirectory();
    const transports: Record<string, Transport> = { a: worker("a", { overloaded: true }), b: worker("b") };
    const inferenceFor = createInferenceRouter({ workers, transportFor: (w) => transports[w.id]! });
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    workers.publish({ id: "b", address: "", models: ["m"], slotsTotal: 4, slotsFree: 2 });
    expect(await collect(inferenceFor("m").generate({ model: "m" }))).toEqual(["b0", "b1", "b2"]);

    transports.b = worker("b", { overloaded: true });
    const onlyB = createInferenceRouter({ workers, transportFor: (w) => transports[w.id]! });
    const err = await collect(onlyB("m").generate({ model: "m" })).catch((e: unknown) => e);
    expect(isOverloaded(err)).toBe(true);
  });

  it("ends a stream whose worker breaks off after it started with Unavailable, naming the worker", async () => {
    const workers = createInProcessWorkerDirectory();
    const inferenceFor = createInferenceRouter({ workers, transportFor: () => worker("a", { breakAfter: 2 }) });
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const e of inferenceFor("m").generate({ model: "m" })) if (e.event.case === "started") seen.push(e.event.value.workerId);
    })().catch((e: unknown) => ConnectError.from(e));
    expect(seen).toEqual(["a0", "a1"]);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).rawMessage).toMatch(/inference worker a stopped answering/);
  });

  it("leaves a stream the caller cancelled as Canceled", async () => {
    const workers = createInProcessWorkerDirectory();
    const inferenceFor = createInferenceRouter({ workers, transportFor: () => worker("a") });
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    const controller = new AbortController();
    const err = await (async () => {
      for await (const _ of inferenceFor("m").generate({ model: "m" }, { signal: controller.signal })) controller.abort();
    })().catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Canceled);
  });
});
