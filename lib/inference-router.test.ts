import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { InferenceService, OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import { createInProcessWorkerDirectory } from "./heartbeats/in-process.js";
import { createInferenceRouter, isOverloaded } from "./inference-router.js";

/** A worker that answers CountTokens with its own number, or refuses as overloaded. */
function fakeWorker(tokens: number, state: { overloaded: boolean }) {
  return createRouterTransport((router) =>
    router.service(InferenceService, {
      countTokens() {
        if (state.overloaded) {
          throw new ConnectError("full", Code.ResourceExhausted, undefined, [{ desc: OverloadedSchema, value: { retryAfterSeconds: 2 } }]);
        }
        return { tokens };
      },
      async *generate(req) {
        yield { event: { case: "started", value: { model: req.model, workerId: String(tokens), promptTokens: 0 } } };
      },
    }),
  );
}

function setup() {
  const workers = createInProcessWorkerDirectory();
  const states = { a: { overloaded: false }, b: { overloaded: false } };
  const transports = { a: fakeWorker(1, states.a), b: fakeWorker(2, states.b) };
  const inferenceFor = createInferenceRouter({ workers, transportFor: (w) => transports[w.id as "a" | "b"] });
  return { workers, states, inferenceFor };
}

describe("createInferenceRouter", () => {
  it("sends each call to the least-loaded live worker serving the model", async () => {
    const { workers, inferenceFor } = setup();
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 1 });
    workers.publish({ id: "b", address: "", models: ["m", "n"], slotsTotal: 4, slotsFree: 3 });
    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(2);
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(1);
    for await (const event of inferenceFor("m").generate({ model: "m" })) {
      expect(event.event.case === "started" && event.event.value.workerId).toBe("1");
    }
  });

  it("moves on to the next worker when one is overloaded, and fails Overloaded only when all are", async () => {
    const { workers, states, inferenceFor } = setup();
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    workers.publish({ id: "b", address: "", models: ["m"], slotsTotal: 4, slotsFree: 1 });
    states.a.overloaded = true;
    expect((await inferenceFor("m").countTokens({ text: "x" })).tokens).toBe(2);
    states.b.overloaded = true;
    const err = await inferenceFor("m")
      .countTokens({ text: "x" })
      .catch((e: unknown) => e);
    expect(isOverloaded(err)).toBe(true);
  });

  it("fails Unavailable when no live worker serves the model", async () => {
    const { workers, inferenceFor } = setup();
    workers.publish({ id: "a", address: "", models: ["m"], slotsTotal: 4, slotsFree: 4 });
    const err = await inferenceFor("other")
      .countTokens({ text: "x" })
      .catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).rawMessage).toMatch(/no live inference worker serves model "other"/);
    const streamErr = await (async () => {
      for await (const _ of inferenceFor("other").generate({})) void _;
    })().catch((e: unknown) => ConnectError.from(e));
    expect((streamErr as ConnectError).code).toBe(Code.Unavailable);
  });
});
