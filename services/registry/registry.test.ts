import { createClient, createRouterTransport, Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ModelKind, RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { createInProcessWorkerDirectory } from "../../lib/heartbeats/in-process.js";
import { parseCatalog } from "./catalog.js";
import { registryRoutes } from "./server.js";

const catalog = parseCatalog(
  {
    models: [
      {
        id: "textmodel-26b",
        kind: "text",
        family: "textmodel",
        version: "26b",
        release_date: "2026-11-22",
        description: "text",
        model_dir: "/m/small",
      },
      {
        id: "decisionmodel-0.1",
        kind: "decision",
        family: "decisionmodel",
        version: "0.1",
        release_date: "2026-11-22",
        description: "dm 0.1",
        model_dir: "/m/small",
      },
      {
        id: "decisionmodel-0.2",
        kind: "decision",
        family: "decisionmodel",
        version: "0.2",
        release_date: "2027-02-01",
        description: "dm 0.2",
        model_dir: "/m/big",
      },
    ],
    latest: [{ id: "decisionmodel-latest", family: "decisionmodel", aliases: ["jev-latest"] }],
  },
  "/",
);

function setup() {
  let now = 1_000_000;
  const workers = createInProcessWorkerDirectory({ ttlMs: 5_000, clock: () => now });
  const client = createClient(RegistryService, createRouterTransport(registryRoutes({ catalog, workers })));
  return { client, workers, advance: (ms: number) => (now += ms) };
}

async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

describe("RegistryService over the in-memory transport", () => {
  it("lists nothing while no worker is alive, everything with include_unavailable", async () => {
    const { client } = setup();
    expect((await client.listModels({})).models).toEqual([]);
    const all = await client.listModels({ includeUnavailable: true });
    expect(all.models.map((m) => m.id)).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1", "decisionmodel-0.2"]);
  });

  it("lists the models a live worker serves, with the alias but never jev-latest", async () => {
    const { client, workers } = setup();
    workers.publish({ id: "w1", address: "", models: ["small"], slotsTotal: 4, slotsFree: 4 });
    const listing = await client.listModels({});
    // decisionmodel-latest points at 0.2, which nobody serves, so the alias is not callable now.
    expect(listing.models.map((m) => m.id)).toEqual(["textmodel-26b", "decisionmodel-0.1"]);

    workers.publish({ id: "w2", address: "http://w2:9000", models: ["big"], slotsTotal: 2, slotsFree: 1 });
    const full = await client.listModels({});
    expect(full.models.map((m) => m.id)).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1", "decisionmodel-0.2"]);
    const alias = full.models[1]!;
    expect(alias).toMatchObject({ aliasOf: "decisionmodel-0.2", releaseDate: "2027-02-01", kind: ModelKind.DECISION, servingId: "big" });
    expect(alias.description).toMatch(/newest release of the decisionmodel family, now decisionmodel-0.2/);

    const decisions = await client.listModels({ kind: ModelKind.DECISION });
    expect(decisions.models.map((m) => m.id)).toEqual(["decisionmodel-latest", "decisionmodel-0.1", "decisionmodel-0.2"]);
  });

  it("resolves aliases to the versioned entry with its live workers, least loaded first", async () => {
    const { client, workers } = setup();
    workers.publish({ id: "busy", address: "http://a", models: ["big"], slotsTotal: 4, slotsFree: 1 });
    workers.publish({ id: "idle", address: "http://b", models: ["big", "small"], slotsTotal: 4, slotsFree: 3 });
    workers.publish({ id: "other", address: "http://c", models: ["small"], slotsTotal: 4, slotsFree: 4 });
    for (const id of ["decisionmodel-latest", "jev-latest", "decisionmodel-0.2"]) {
      const resolved = await client.resolveModel({ model: id });
      expect(resolved.model).toMatchObject({ id: "decisionmodel-0.2", aliasOf: "", servingId: "big", modelDir: "/m/big" });
      expect(resolved.workers.map((w) => w.id)).toEqual(["idle", "busy"]);
    }
    const small = await client.resolveModel({ model: "textmodel-26b", kind: ModelKind.TEXT });
    expect(small.workers.map((w) => [w.id, w.slotsFree])).toEqual([
      ["other", 4],
      ["idle", 3],
    ]);
  });

  it("resolves a known model without live workers to an empty worker list", async () => {
    const { client } = setup();
    const resolved = await client.resolveModel({ model: "decisionmodel-0.1" });
    expect(resolved.model?.id).toBe("decisionmodel-0.1");
    expect(resolved.workers).toEqual([]);
  });

  it("answers NotFound for unknown ids, InvalidArgument for no id or the wrong kind", async () => {
    const { client } = setup();
    expect(await codeOf(client.resolveModel({ model: "gpt-4" }))).toBe(Code.NotFound);
    expect(await codeOf(client.resolveModel({ model: "" }))).toBe(Code.InvalidArgument);
    expect(await codeOf(client.resolveModel({ model: "textmodel-26b", kind: ModelKind.DECISION }))).toBe(Code.InvalidArgument);
  });

  it("forgets a worker whose heartbeats stop, and one that withdraws", async () => {
    const { client, workers, advance } = setup();
    workers.publish({ id: "w1", address: "", models: ["small"], slotsTotal: 1, slotsFree: 1 });
    workers.publish({ id: "w2", address: "", models: ["small"], slotsTotal: 1, slotsFree: 1 });
    advance(4_000);
    workers.publish({ id: "w2", address: "", models: ["small"], slotsTotal: 1, slotsFree: 0 });
    advance(2_000);
    expect((await client.listWorkers({})).workers.map((w) => w.id)).toEqual(["w2"]);
    workers.withdraw("w2");
    expect((await client.listWorkers({})).workers).toEqual([]);
    expect((await client.listModels({})).models).toEqual([]);
  });
});
