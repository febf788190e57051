import { Code, ConnectError, createClient, createContextKey, createContextValues } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { InferenceService, OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { createInProcessTransport } from "./in-process-transport.js";

const marker = createContextKey("none");

function setup(seen: { signals: AbortSignal[]; headers: string[]; values: string[] } = { signals: [], headers: [], values: [] }) {
  const transport = createInProcessTransport((services) =>
    services
      .service(RegistryService, {
        listWorkers(_req, ctx) {
          seen.headers.push(ctx.requestHeader.get("x-test") ?? "");
          seen.values.push(ctx.values.get(marker));
          return { workers: [{ id: "w", slotsTotal: 2 }] };
        },
        resolveModel(req) {
          if (req.model === "busy") {
            throw new ConnectError("full", Code.ResourceExhausted, undefined, [
              { desc: OverloadedSchema, value: { retryAfterSeconds: 4 } },
            ]);
          }
          if (req.model === "bug") throw new TypeError("boom");
          return { model: { id: req.model } };
        },
        listModels(_req, ctx) {
          seen.signals.push(ctx.signal);
          return new Promise(() => undefined); // never answers
        },
      })
      .service(InferenceService, {
        async *generate(req, ctx) {
          seen.signals.push(ctx.signal);
          for (let i = 0; i < 5; i++) {
            if (req.model === "fail" && i === 2) throw new ConnectError("model failed", Code.Unavailable);
            yield { event: { case: "delta", value: { content: String(i), blockIndex: i } } };
          }
        },
      }),
  );
  return { registry: createClient(RegistryService, transport), inference: createClient(InferenceService, transport), seen };
}

async function errorOf(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error("expected an error");
}

describe("createInProcessTransport", () => {
  it("calls the implementation with full messages, headers and context values", async () => {
    const { registry, seen } = setup();
    const res = await registry.listWorkers({}, { headers: { "x-test": "yes" }, contextValues: createContextValues().set(marker, "set") });
    expect(res.workers[0]).toMatchObject({ $typeName: "tessera.registry.v1.Worker", id: "w", slotsTotal: 2, address: "" });
    expect(seen.headers).toEqual(["yes"]);
    expect(seen.values).toEqual(["set"]);
  });

  it("passes errors and their details through; other exceptions become Unknown", async () => {
    const { registry } = setup();
    const busy = await errorOf(registry.resolveModel({ model: "busy" }));
    expect(busy.code).toBe(Code.ResourceExhausted);
    expect(busy.findDetails(OverloadedSchema)[0]?.retryAfterSeconds).toBe(4);
    const bug = await errorOf(registry.resolveModel({ model: "bug" }));
    expect(bug.code).toBe(Code.Unknown);
    expect(bug.rawMessage).toBe("boom");
  });

  it("answers the same whether the implementation answers at once or later", async () => {
    let calls = 0;
    const transport = createInProcessTransport((services) =>
      services.service(RegistryService, {
        resolveModel(req) {
          calls++;
          if (req.model === "later") return Promise.resolve({ model: { id: "later" } });
          if (req.model === "later-bug") return Promise.reject(new TypeError("late boom"));
          if (req.model === "later-busy") return Promise.reject(new ConnectError("full", Code.ResourceExhausted));
          return { model: { id: req.model } };
        },
      }),
    );
    const registry = createClient(RegistryService, transport);
    const now = await registry.resolveModel({ model: "now" });
    const later = await registry.resolveModel({ model: "later" });
    expect(now.model).toMatchObject({ $typeName: "tessera.registry.v1.ModelEntry", id: "now" });
    expect(later.model).toMatchObject({ $typeName: "tessera.registry.v1.ModelEntry", id: "later" });
    const bug = await errorOf(registry.resolveModel({ model: "later-bug" }));
    expect([bug.code, bug.rawMessage]).toEqual([Code.Unknown, "late boom"]);
    expect((await errorOf(registry.resolveModel({ model: "later-busy" }))).code).toBe(Code.ResourceExhausted);
    // A caller's signal already aborted never reaches the implementation.
    const aborted = new AbortController();
    aborted.abort();
    expect((await errorOf(registry.resolveModel({ model: "never" }, { signal: aborted.signal }))).code).toBe(Code.Canceled);
    expect(calls).toBe(4);
  });

  it("answers Unimplemented for a method nobody registered", async () => {
    const { inference } = setup();
    expect((await errorOf(inference.countTokens({}))).code).toBe(Code.Unimplemented);
  });

  it("fails Canceled when the caller aborts, and DeadlineExceeded past the timeout", async () => {
    const { registry, seen } = setup();
    const controller = new AbortController();
    const pending = registry.listModels({}, { signal: controller.signal });
    controller.abort();
    expect((await errorOf(pending)).code).toBe(Code.Canceled);
    expect(seen.signals[0]!.aborted).toBe(true);
    expect((await errorOf(registry.listModels({}, { timeoutMs: 20 }))).code).toBe(Code.DeadlineExceeded);
  });

  it("streams server messages and ends with the handler's error", async () => {
    const { inference } = setup();
    const got: string[] = [];
    for await (const event of inference.generate({ model: "ok" })) {
      if (event.event.case === "delta") got.push(event.event.value.content);
    }
    expect(got).toEqual(["0", "1", "2", "3", "4"]);

    const partial: string[] = [];
    const err = await errorOf(
      (async () => {
        for await (const event of inference.generate({ model: "fail" })) {
          if (event.event.case === "delta") partial.push(event.event.value.content);
        }
      })(),
    );
    expect(partial).toEqual(["0", "1"]);
    expect(err.code).toBe(Code.Unavailable);
  });

  it("cancels the handler when the caller aborts mid-stream", async () => {
    const { inference, seen } = setup();
    const controller = new AbortController();
    const err = await errorOf(
      (async () => {
        for await (const event of inference.generate({ model: "ok" }, { signal: controller.signal })) {
          void event;
          controller.abort();
        }
      })(),
    );
    expect(err.code).toBe(Code.Canceled);
    expect(seen.signals[0]!.aborted).toBe(true);
  });

  it("cancels the handler when the transport's stream is closed early", async () => {
    const seen = { signals: [] as AbortSignal[] };
    const transport = createInProcessTransport((services) =>
      services.service(InferenceService, {
        async *generate(_req, ctx) {
          seen.signals.push(ctx.signal);
          for (;;) yield { event: { case: "delta", value: { content: "x" } } };
        },
      }),
    );
    const res = await transport.stream(
      InferenceService.method.generate,
      undefined,
      undefined,
      undefined,
      (async function* () {
        yield {};
      })(),
    );
    const iterator = res.message[Symbol.asyncIterator]();
    await iterator.next();
    await iterator.return?.();
    expect(seen.signals[0]!.aborted).toBe(true);
    expect(ConnectError.from(seen.signals[0]!.reason).code).toBe(Code.Canceled);
  });
});
