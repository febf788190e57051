// The listing route on its own, with a registry double: one registry call per turn of the
// event loop, shared by the requests of that turn, and a fresh answer on the next turn.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ListModelsResponseSchema, ModelEntrySchema, type ListModelsResponse } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { RequestContext } from "../route.js";
import { modelsRoute } from "./models.js";

const entry = (id: string) => create(ModelEntrySchema, { id, description: `the ${id}`, releaseDate: "2026-11-22" });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const ctx = {} as RequestContext;

function registryDouble() {
  const double = {
    calls: 0,
    answer: (): Promise<ListModelsResponse> => Promise.resolve(create(ListModelsResponseSchema, { models: double.models })),
    models: [entry("a")],
    registry: {
      listModels: () => {
        double.calls++;
        return double.answer();
      },
    },
  };
  return double;
}

async function listed(route: ReturnType<typeof modelsRoute>): Promise<string[]> {
  const reply = await route.handle(ctx);
  return (JSON.parse(reply!.json!) as { models: { name: string }[] }).models.map((m) => m.name);
}

describe("modelsRoute", () => {
  it("asks the registry once for the requests of one turn, and again on the next", async () => {
    const double = registryDouble();
    const route = modelsRoute(double as never);
    expect(await Promise.all([listed(route), listed(route), listed(route)])).toEqual([["a"], ["a"], ["a"]]);
    expect(double.calls).toBe(1);

    await nextTurn();
    double.models = [entry("a"), entry("b")];
    expect(await listed(route)).toEqual(["a", "b"]);
    expect(double.calls).toBe(2);
  });

  it("gives every request of the turn the registry's failure, and tries again on the next turn", async () => {
    const double = registryDouble();
    const route = modelsRoute(double as never);
    double.answer = () => Promise.reject(new Error("registry down"));
    const results = await Promise.allSettled([listed(route), listed(route)]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(double.calls).toBe(1);

    await nextTurn();
    double.answer = () => Promise.resolve(create(ListModelsResponseSchema, { models: double.models }));
    expect(await listed(route)).toEqual(["a"]);
  });
});
