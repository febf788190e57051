import { Code, ConnectError, createClient, createRouterTransport, type Transport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { isConnectionFailure, isRetryableElsewhere } from "./errors.js";
import { createFailoverTransport } from "./failover-transport.js";

/** A registry replica that answers with its name in the worker list, or fails as told. */
function replica(name: string, state: { fail?: "refused" | "unavailable" | "invalid"; calls: number }): Transport {
  const router = createRouterTransport((r) =>
    r.service(RegistryService, {
      listWorkers() {
        state.calls += 1;
        if (state.fail === "unavailable") throw new ConnectError("store away", Code.Unavailable);
        if (state.fail === "invalid") throw new ConnectError("bad", Code.InvalidArgument);
        return { workers: [{ id: name }] };
      },
    }),
  );
  return {
    unary(...args) {
      if (state.fail === "refused") {
        state.calls += 1;
        const cause = Object.assign(new Error(`connect ECONNREFUSED ${name}`), { code: "ECONNREFUSED" });
        return Promise.reject(new ConnectError(`connect ECONNREFUSED ${name}`, Code.Unavailable, undefined, undefined, cause));
      }
      return router.unary(...args);
    },
    stream: (...args) => router.stream(...args),
  };
}

describe("createFailoverTransport", () => {
  it("spreads calls over the replicas and retries the next one when a replica is unreachable or Unavailable", async () => {
    const a = { calls: 0 } as { fail?: "refused" | "unavailable" | "invalid"; calls: number };
    const b = { calls: 0 } as typeof a;
    let now = 0;
    const client = createClient(
      RegistryService,
      createFailoverTransport(
        [
          { name: "a", transport: replica("a", a) },
          { name: "b", transport: replica("b", b) },
        ],
        { clock: () => now, downMs: 1000 },
      ),
    );
    const who = async () => (await client.listWorkers({})).workers[0]!.id;
    expect([await who(), await who(), await who(), await who()]).toEqual(["a", "b", "a", "b"]);

    a.fail = "refused";
    expect([await who(), await who(), await who()]).toEqual(["b", "b", "b"]);
    // Unreachable: tried once (after its two answers), then put last for downMs.
    expect(a.calls).toBe(3);
    now = 1001;
    a.fail = undefined;
    expect(new Set([await who(), await who()])).toEqual(new Set(["a", "b"]));

    b.fail = "unavailable";
    expect([await who(), await who()]).toEqual(["a", "a"]);
  });

  it("fails Unavailable naming the replicas when none answers, and passes other errors on at once", async () => {
    const a = { calls: 0, fail: "refused" as const };
    const b = { calls: 0, fail: "unavailable" as const };
    const client = createClient(
      RegistryService,
      createFailoverTransport([
        { name: "http://a", transport: replica("a", a) },
        { name: "http://b", transport: replica("b", b) },
      ]),
    );
    const err = await client.listWorkers({}).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).rawMessage).toMatch(/RegistryService.ListWorkers: no replica answered \(http:\/\/a, http:\/\/b\)/);

    const c = { calls: 0, fail: "invalid" as const };
    const d = { calls: 0 };
    const strict = createClient(
      RegistryService,
      createFailoverTransport([
        { name: "c", transport: replica("c", c) },
        { name: "d", transport: replica("d", d) },
      ]),
    );
    expect(((await strict.listWorkers({}).catch((e: unknown) => e)) as ConnectError).code).toBe(Code.InvalidArgument);
    expect(d.calls).toBe(0);
  });

  it("tells a broken connection from an answer, and never retries what the caller cancelled", () => {
    const reset = new ConnectError(
      "socket hang up",
      Code.Aborted,
      undefined,
      undefined,
      Object.assign(new Error("x"), { code: "ECONNRESET" }),
    );
    expect(isConnectionFailure(reset)).toBe(true);
    expect(isConnectionFailure(new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled))).toBe(true);
    expect(isConnectionFailure(new ConnectError("model failed", Code.Unavailable))).toBe(false);
    expect(isRetryableElsewhere(new ConnectError("model failed", Code.Unavailable))).toBe(true);
    const aborted = AbortSignal.abort();
    expect(isConnectionFailure(reset, aborted)).toBe(false);
    expect(isRetryableElsewhere(new ConnectError("x", Code.Unavailable), aborted)).toBe(false);
  });
});
