import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ModelKind } from "../../gen/tessera/registry/v1/registry_pb.js";
import { CatalogError, loadCatalog, parseCatalog } from "./catalog.js";

const repoRoot = resolve(import.meta.dirname, "../..");

function model(id: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    kind: "decision",
    family: "decisionmodel",
    version: id.split("-")[1] ?? "1",
    release_date: "2026-01-01",
    description: `the ${id} model`,
    model_dir: "models/x",
    ...extra,
  };
}

function problemsOf(config: unknown): string[] {
  try {
    parseCatalog(config, "/base");
  } catch (err) {
    if (err instanceof CatalogError) return err.problems;
    throw err;
  }
  return [];
}

describe("the default models config", () => {
  const catalog = loadCatalog(join(repoRoot, "models.config.json"));

  it("serves the bundled model as textmodel-26b and decisionmodel-0.1 from one directory", () => {
    const text = catalog.resolve("textmodel-26b")!.model;
    const decision = catalog.resolve("decisionmodel-0.1")!.model;
    expect(text.kind).toBe(ModelKind.TEXT);
    expect(decision.kind).toBe(ModelKind.DECISION);
    expect(decision.releaseDate).toBe("2026-11-22");
    expect(text.modelDir).toBe(join(repoRoot, "models/tessera-bd-small"));
    expect(decision.servingId).toBe(text.servingId);
    expect(catalog.servedModels()).toEqual([{ servingId: "tessera-bd-small", dir: join(repoRoot, "models/tessera-bd-small") }]);
    expect(text.description).toMatch(/bundled/);
    expect(text.description).toMatch(/not a 26B model/);
  });

  it("resolves decisionmodel-latest and jev-latest to decisionmodel-0.1 and lists only the alias and the versions", () => {
    expect(catalog.resolve("decisionmodel-latest")!.model.id).toBe("decisionmodel-0.1");
    expect(catalog.resolve("jev-latest")!.model.id).toBe("decisionmodel-0.1");
    expect(catalog.resolve("jev-latest")!.latestAlias!.id).toBe("decisionmodel-latest");
    expect(catalog.listed.map((l) => l.id)).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1"]);
    expect(catalog.resolve("decisionmodel")).toBeUndefined();
  });
});

describe("parseCatalog", () => {
  it("points a latest alias at the newest release date, wherever it is in the file", () => {
    const catalog = parseCatalog(
      {
        models: [
          model("decisionmodel-0.3", { release_date: "2027-03-01" }),
          model("decisionmodel-0.1", { release_date: "2026-11-22" }),
          model("decisionmodel-0.2", { release_date: "2027-01-15" }),
        ],
        latest: [{ id: "decisionmodel-latest", family: "decisionmodel", aliases: ["jev-latest"] }],
      },
      "/base",
    );
    expect(catalog.resolve("decisionmodel-latest")!.model.id).toBe("decisionmodel-0.3");
    expect(catalog.resolve("jev-latest")!.model.id).toBe("decisionmodel-0.3");
    expect(catalog.listed.map((l) => l.id)).toEqual([
      "decisionmodel-latest",
      "decisionmodel-0.3",
      "decisionmodel-0.1",
      "decisionmodel-0.2",
    ]);
  });

  it("accepts per-version aliases without listing them", () => {
    const catalog = parseCatalog({ models: [model("decisionmodel-0.1", { aliases: ["dm-first"] })] }, "/base");
    expect(catalog.resolve("dm-first")!.model.id).toBe("decisionmodel-0.1");
    expect(catalog.listed.map((l) => l.id)).toEqual(["decisionmodel-0.1"]);
  });

  it("resolves relative model directories against the config's directory and derives serving ids", () => {
    const catalog = parseCatalog(
      { models: [model("a-1", { model_dir: "m/one" }), model("b-1", { model_dir: "/abs/two", serving_id: "two-v1" })] },
      "/base",
    );
    expect(catalog.resolve("a-1")!.model).toMatchObject({ modelDir: "/base/m/one", servingId: "one" });
    expect(catalog.resolve("b-1")!.model).toMatchObject({ modelDir: "/abs/two", servingId: "two-v1" });
  });

  it("lists every problem of a bad config at once", () => {
    const problems = problemsOf({
      models: [
        model("dup"),
        model("dup"),
        model("bad-date", { release_date: "2026-02-30" }),
        model("bad-kind", { kind: "image" }),
        model("typo", { relase_date: "2026-01-01" }),
        model("other-dir", { model_dir: "elsewhere/x" }),
        { ...model("no-dir"), model_dir: "" },
        model("has space"),
      ],
      latest: [
        { id: "ghost-latest", family: "ghost" },
        { id: "dup", family: "decisionmodel" },
      ],
      extra: true,
    });
    const text = problems.join("\n");
    expect(text).toMatch(/unknown field "extra"/);
    expect(text).toMatch(/models\[1\]: id "dup" is used twice/);
    expect(text).toMatch(/models\[2\]: "release_date" must be a date/);
    expect(text).toMatch(/models\[3\]: "kind" must be "text" or "decision"/);
    expect(text).toMatch(/models\[4\]: unknown field "relase_date"/);
    expect(text).toMatch(/models\[5\]: serving id "x" already names \/base\/models\/x/);
    expect(text).toMatch(/models\[6\]: "model_dir" must be a non-empty string/);
    expect(text).toMatch(/models\[7\]: id must be/);
    expect(text).toMatch(/latest\[0\]: no model has family "ghost"/);
    expect(text).toMatch(/latest\[1\]: id "dup" is used twice/);
  });

  it("refuses what is not a models config", () => {
    expect(() => parseCatalog([], "/base")).toThrow(CatalogError);
    expect(problemsOf({ models: [] })).toEqual(['"models" must be a non-empty array']);
    expect(() => loadCatalog("/nonexistent/models.config.json")).toThrow(/ENOENT/);
  });
});

describe("execution_providers", () => {
  it("puts a model on its own providers, over the server's; bad lists are problems", () => {
    const catalog = parseCatalog({ models: [model("decisionmodel-0.1", { execution_providers: ["webgpu"] })] }, "/base");
    expect(catalog.servedModels()).toEqual([{ servingId: "x", dir: "/base/models/x", executionProviders: ["webgpu"] }]);
    for (const bad of [[], ["tpu"], ["cpu", "cpu"], "webgpu"]) {
      expect(problemsOf({ models: [model("decisionmodel-0.1", { execution_providers: bad })] })).toEqual([
        'models[0]: "execution_providers" must be a list of distinct providers among cpu, webgpu, cuda (e.g. ["webgpu"])',
      ]);
    }
  });
});
