// A converted model's `present_new.*` outputs (docs/model-contract.md, "New key/values"): the
// current positions' key/values alone, which the engine fetches instead of the whole `present.*`.
// Through real ONNX Runtime sessions: the slots the runner brings back and the cache builds from
// them equal those of `present.*` fetched directly; the bundled model (no such outputs) still
// gets its whole present.
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchBuilder } from "../../services/inference/decoder/batch.js";
import { createOrtRunner, type LayerKV, newKVNames } from "../../services/inference/decoder/forward.js";
import { SequenceKV } from "../../services/inference/decoder/kv-cache.js";
import { loadModelDir, type ModelDir } from "../../services/inference/engine/model-dir.js";
import { kvShapeOf } from "../../services/inference/engine/runtime.js";
import { REPO_ROOT } from "../helpers/tessera.js";
import { type ConvertedFixtures, convertedFixtures, HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const opened: ModelDir[] = [];
afterAll(async () => {
  for (const m of opened) await m.close();
});

async function open(dir: string): Promise<ModelDir> {
  const model = await loadModelDir(dir, { worker: false });
  opened.push(model);
  return model;
}

/**
 * Two caches of the same 7 prompt tokens then a forward of 3 over them: one stored from what the
 * runner fetched, one from `present.*` fetched from the session directly with the same feeds.
 */
async function bothWays(model: ModelDir): Promise<{ viaRunner: SequenceKV; direct: SequenceKV; first: number | undefined }> {
  const shape = kvShapeOf(model);
  const runner = createOrtRunner(model.session, shape);
  const { blockSize, padTokenId } = model.config;
  const viaRunner = new SequenceKV(shape, 4);
  const direct = new SequenceKV(shape, 4);
  let first: number | undefined;
  for (const tokens of [
    [5, 9, 2, 7, 1, 3, 8],
    [4, 6, 2],
  ]) {
    const inputs = new BatchBuilder(shape, blockSize, padTokenId).build([{ kv: viaRunner, tokens }]);
    const out = await runner.run(inputs, { present: true, output: "logits" });
    first = out.present !== undefined && !Array.isArray(out.present) && "first" in out.present ? out.present.first : undefined;
    viaRunner.append(out.present!, 0, inputs.past + inputs.seq, inputs.past, tokens.length);

    const { batch: B, seq: S, past: P } = inputs;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", inputs.inputIds, [B, S]),
      position_ids: new ort.Tensor("int64", inputs.positionIds, [B, S]),
      attention_mask: new ort.Tensor("float32", inputs.attentionMask, [B, 1, S, P + S]),
    };
    for (const name of model.session.inputNames.filter((n) => n.startsWith("tessera_"))) {
      feeds[name] =
        name === "tessera_compute_logits"
          ? new ort.Tensor("bool", Uint8Array.of(1), [])
          : new ort.Tensor(
              "int64",
              BigInt64Array.from({ length: S }, (_, i) => BigInt(i)),
              [B, S],
            );
    }
    (inputs.pastKeyValues as LayerKV[]).forEach((layer, l) => {
      feeds[`past_key_values.${l}.key`] = new ort.Tensor("float32", layer.key, [B, shape.heads, P, shape.headDim]);
      feeds[`past_key_values.${l}.value`] = new ort.Tensor("float32", layer.value, [B, shape.heads, P, shape.headDim]);
    });
    const names = Array.from({ length: shape.layers }, (_, l) => [`present.${l}.key`, `present.${l}.value`]).flat();
    const got = await model.session.run(feeds, names);
    const whole = Array.from({ length: shape.layers }, (_, l) => ({
      key: got[`present.${l}.key`]!.data as Float32Array,
      value: got[`present.${l}.value`]!.data as Float32Array,
    }));
    direct.append(whole, 0, P + S, P, tokens.length);
  }
  return { viaRunner, direct, first };
}

describe.skipIf(!HAVE_CONVERT_VENV)("a converted model's present_new outputs", () => {
  let fx: ConvertedFixtures;
  beforeAll(async () => {
    fx = await convertedFixtures();
  }, 900_000);

  for (const kind of ["qwen3", "sdarInt8", "fastDllm"] as const) {
    it(`${kind}: has them, and the engine's cache built from them equals the one built from present`, async () => {
      const model = await open(fx.models[kind]);
      for (const name of newKVNames(model.config.numLayers)) expect(model.session.outputNames).toContain(name);
      const { viaRunner, direct, first } = await bothWays(model);
      expect(first).toBe(7); // the second forward's present starts at its past
      expect(viaRunner.length).toBe(10);
      expect(viaRunner.layersOfLength()).toEqual(direct.layersOfLength());
    });
  }

  it("the bundled model has none, and the runner fetches its whole present", async () => {
    const model = await open(join(REPO_ROOT, "models/tessera-bd-small"));
    expect(model.session.outputNames).not.toContain("present_new.0.key");
    const { viaRunner, direct, first } = await bothWays(model);
    expect(first).toBeUndefined();
    expect(viaRunner.layersOfLength()).toEqual(direct.layersOfLength());
  });
});
