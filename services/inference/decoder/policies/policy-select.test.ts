// Which unmasking policy a model decodes with: the models config entry's unmask_policy, else
// the server setting, else the model's config.json decoding.policy, else threshold; the
// threshold's default confidence and the sub-block size from the same places; specs that do
// not parse fail naming where they came from; serving ids that share a model keep their own.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CatalogError, parseCatalog } from "../../../registry/catalog.js";
import { selectPolicy } from "./select.js";
import { createModelRuntime } from "../../engine/runtime.js";
import { parseModelConfig } from "../../core/model-config.js";
import { loadModelDir, type ModelDir } from "../../engine/model-dir.js";
import { TINY_MODEL_DIR } from "../../../../test/helpers/inference-engine.js";

describe("selectPolicy", () => {
  const model = { policy: "fill(0.6)+threshold(0.9)", threshold: 0.8, subBlockSize: 8 };

  it("takes the models config entry, else the server setting, else config.json, else threshold", () => {
    expect(selectPolicy({ catalog: "sequential", server: "threshold(0.5)", model }).name).toBe("sequential");
    expect(selectPolicy({ server: "threshold(0.5)", model }).name).toBe("threshold(confidence=0.5)");
    expect(selectPolicy({ model }).name).toBe("fill(confidence=0.6)+threshold(confidence=0.9)");
    expect(selectPolicy({ model: {} }).name).toBe("threshold(confidence=0.9)");
  });

  it("fills unnamed knobs from the server's threshold, else the model's, and the model's sub-block size", () => {
    expect(selectPolicy({ server: "threshold", serverThreshold: 0.95, model }).name).toBe("threshold(confidence=0.95)");
    expect(selectPolicy({ server: "subblocks+threshold", model }).name).toBe("subblocks(size=8,confident=0.9)+threshold(confidence=0.8)");
  });

  it("names where a bad spec came from", () => {
    expect(() => selectPolicy({ catalog: "greedy", model })).toThrow(/models config unmask_policy "greedy": .*unknown "greedy"/);
    expect(() => selectPolicy({ server: "threshold(7)", model })).toThrow(/TESSERA_UNMASK_POLICY "threshold\(7\)"/);
    expect(() => selectPolicy({ model: { policy: "fill(2)" } })).toThrow(/config.json decoding.policy "fill\(2\)"/);
  });
});

describe("config.json decoding", () => {
  const base = {
    model_type: "tessera-block-diffusion",
    num_hidden_layers: 1,
    num_key_value_heads: 1,
    head_dim: 4,
    vocab_size: 16,
    block_size: 8,
    max_position_embeddings: 64,
    mask_token_id: 1,
    eos_token_id: 3,
    pad_token_id: 0,
  };

  it("reads the model's decoding defaults and refuses bad ones", () => {
    expect(parseModelConfig(base).decoding).toEqual({});
    expect(parseModelConfig({ ...base, decoding: { policy: "fill(0.6)", threshold: 0.85, sub_block_size: 16 } }).decoding).toEqual({
      policy: "fill(0.6)",
      threshold: 0.85,
      subBlockSize: 16,
    });
    expect(() => parseModelConfig({ ...base, decoding: { threshold: 2 } })).toThrow(/decoding.threshold/);
    expect(() => parseModelConfig({ ...base, decoding: { policy: 3 } })).toThrow(/decoding.policy/);
    expect(() => parseModelConfig({ ...base, decoding: [] })).toThrow(/"decoding" must be an object/);
  });
});

describe("models config unmask_policy", () => {
  const entry = (id: string, extra: Record<string, unknown>) => ({
    id,
    kind: "text",
    family: "textmodel",
    version: id.split("-")[1],
    release_date: "2026-01-01",
    description: "d",
    model_dir: "models/x",
    ...extra,
  });

  it("goes with the serving id, and entries sharing one must agree", () => {
    const catalog = parseCatalog({ models: [entry("t-1", { unmask_policy: "sequential" }), entry("t-2", {})] }, "/base");
    expect(catalog.servedModels()).toEqual([{ servingId: "x", dir: "/base/models/x", unmaskPolicy: "sequential" }]);
    let problems: string[] = [];
    try {
      parseCatalog({ models: [entry("t-1", { unmask_policy: "sequential" }), entry("t-2", { unmask_policy: "threshold" })] }, "/base");
    } catch (err) {
      problems = (err as CatalogError).problems;
    }
    expect(problems).toEqual([expect.stringMatching(/models\[1\]: serving id "x" already decodes with unmask_policy "sequential"/)]);
  });
});

describe("an engine serving several ids", () => {
  let model: ModelDir;
  beforeAll(async () => {
    model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1 });
  });
  afterAll(async () => {
    await model?.close();
  });

  it("decodes each serving id with its own policy, the others with the server's", async () => {
    const engine = createModelRuntime({
      name: "tiny",
      servingIds: ["a", "b"],
      model,
      slots: 1,
      queue: 1,
      serverPolicy: "fill(0.7)",
      servingPolicies: { a: "sequential" },
    });
    expect(engine.policyFor("a").name).toBe("sequential");
    expect(engine.policyFor("b").name).toBe("fill(confidence=0.7)+threshold(confidence=0.9)");
    expect(engine.policy).toBe(engine.policyFor("b"));
    await engine.scheduler.close();
    expect(() => createModelRuntime({ name: "tiny", servingIds: ["a"], model, slots: 1, queue: 1, serverPolicy: "nope" })).toThrow(
      /TESSERA_UNMASK_POLICY "nope"/,
    );
  });
});
