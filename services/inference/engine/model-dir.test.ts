// Loading a model directory: the checks on config.json, the in-graph greedy readout (equal to
// the softmax over the logits), the conditional output head (onnx-head.test.ts tests it in
// depth), and a model whose weights live in an external data file.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { bannedTokens } from "../core/banned-tokens.js";
import { guessAt } from "../decoder/unmask.js";
import { parseModelConfig } from "../core/model-config.js";
import { loadModelDir, type ModelDir } from "./model-dir.js";
import { defaultOpset, usesExternalData, withReadout } from "../onnx/onnx-readout.js";
import { TINY_MODEL_DIR, fullForward } from "../../../test/helpers/inference-engine.js";
import { createOrtRunner } from "../decoder/forward.js";
import { kvShapeOf } from "./runtime.js";

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

function scratchCopy(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-model-test-"));
  scratch.push(dir);
  cpSync(TINY_MODEL_DIR, dir, { recursive: true });
  return dir;
}

async function readoutMatchesLogits(model: ModelDir): Promise<void> {
  const runner = createOrtRunner(model.session, kvShapeOf(model));
  const tokens = model.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|mask|><|mask|><|mask|>");
  const withLogits = await fullForward(model, runner, tokens, "logits");
  const withReadoutOut = await fullForward(model, runner, tokens, "readout");
  expect(withReadoutOut.logits).toBeUndefined();
  const { vocabSize: V, maskTokenId, padTokenId } = model.config;
  const banned = bannedTokens(V, [maskTokenId, padTokenId]);
  for (let i = 0; i < tokens.length; i++) {
    const g = guessAt(withLogits.logits!, i * V, V, banned, i);
    expect(Number(withReadoutOut.readout!.token[i])).toBe(g.token);
    expect(withReadoutOut.readout!.confidence[i]).toBeCloseTo(g.confidence, 5);
  }
}

describe("model directory", () => {
  it("loads the tiny model with the greedy readout added to its graph and its output head made conditional", async () => {
    const model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1 });
    try {
      expect(model.readout).toBe(true);
      expect(model.skippableHead).toBe(true);
      expect(model.config).toMatchObject({ numLayers: 2, numKvHeads: 2, headDim: 16, vocabSize: 687, blockSize: 64 });
      expect(model.decision?.version).toBe(1);
      await readoutMatchesLogits(model);
    } finally {
      await model.close();
    }
  });

  it("reads the operator set and leaves an old model without the readout", () => {
    const bytes = readFileSync(path.join(TINY_MODEL_DIR, "model.onnx"));
    expect(defaultOpset(bytes)).toBe(17);
    expect(usesExternalData(bytes)).toBe(false);
    const old = new BinaryWriter().tag(8, WireType.LengthDelimited).fork().tag(2, WireType.Varint).int64(11).join().finish();
    expect(withReadout(old, 10, [1])).toBeUndefined();
  });

  it("rejects a config.json that breaks the contract, naming the key", () => {
    const config = JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "config.json"), "utf8"));
    expect(() => parseModelConfig({ ...config, model_type: "llama" })).toThrow(/model_type/);
    expect(() => parseModelConfig({ ...config, num_hidden_layers: 0 })).toThrow(/num_hidden_layers/);
    expect(() => parseModelConfig({ ...config, mask_token_id: 99999 })).toThrow(/mask_token_id 99999/);
    expect(() => parseModelConfig([])).toThrow(/object/);
    expect(() => parseModelConfig({ ...config, cpu_int4_accuracy_level: 5 })).toThrow(/cpu_int4_accuracy_level/);
    expect(() => parseModelConfig({ ...config, cpu_int4_accuracy_level: "4" })).toThrow(/cpu_int4_accuracy_level/);
    expect(parseModelConfig({ ...config, cpu_int4_accuracy_level: 0 }).cpuInt4AccuracyLevel).toBe(0);
    expect(parseModelConfig(config).cpuInt4AccuracyLevel).toBeUndefined();
  });

  it("reads contract v2: any model_type, stop ids, logits shift, decoding defaults, chat delimiters; v1 keeps its defaults", () => {
    const config = JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "config.json"), "utf8"));
    const v1 = parseModelConfig(config);
    expect(v1).toMatchObject({ contractVersion: 1, stopTokenIds: [config.eos_token_id], logitsShift: 0, decoding: {} });
    expect(v1.specialTokens).toEqual({ toolCall: ["<tool_call>", "</tool_call>"], thinking: ["<think>", "</think>"] });
    const v2 = parseModelConfig({
      ...config,
      contract_version: 2,
      model_type: "fast_dllm_v2",
      stop_token_ids: [7, config.eos_token_id],
      logits_shift: 1,
      decoding: { threshold: 0.95, policy: "subblocks(size=8,confident=1.01)+threshold", sub_block_size: 8 },
      special_tokens: { tool_call: ["<call>", "</call>"] },
    });
    expect(v2).toMatchObject({ contractVersion: 2, modelType: "fast_dllm_v2", stopTokenIds: [config.eos_token_id, 7], logitsShift: 1 });
    expect(v2.decoding).toEqual({ threshold: 0.95, policy: "subblocks(size=8,confident=1.01)+threshold", subBlockSize: 8 });
    expect(v2.specialTokens).toEqual({ toolCall: ["<call>", "</call>"], thinking: ["<think>", "</think>"] });
    const bad = (extra: object) => () => parseModelConfig({ ...config, contract_version: 2, ...extra });
    expect(bad({ contract_version: 3 })).toThrow(
      /"contract_version" 3 is a canvas model \(DiffusionGemma\): the model pool loads it through canvas-service.ts/,
    );
    expect(bad({ contract_version: 4 })).toThrow(/contract_version/);
    expect(bad({ logits_shift: 2 })).toThrow(/logits_shift/);
    expect(bad({ stop_token_ids: [config.vocab_size] })).toThrow(/stop_token_ids/);
    expect(bad({ decoding: { threshold: 2 } })).toThrow(/decoding.threshold/);
    expect(bad({ special_tokens: { thinking: ["<think>"] } })).toThrow(/special_tokens.thinking/);
    expect(bad({ special_tokens: { tool_call: ["[TOOL_CALLS]", "[/TOOL_CALLS]"] } })).toThrow(/must start with "<"/);
    expect(bad({ special_tokens: { tool_call: ["<call<", "</call>"] } })).toThrow(/no other "<"/);
    expect(bad({ special_tokens: { tool_call_format: "xml" } })).toThrow(/tool_call_format" must be "json" or "gemma4"/);
    // Gemma 4's call syntax is read by the parser but not written by the grammar: canvas models only.
    expect(bad({ special_tokens: { tool_call_format: "gemma4" } })).toThrow(/is for canvas models/);
  });

  it("refuses a directory whose model misses contract outputs or whose tokenizer disagrees", async () => {
    const dir = scratchCopy();
    const config = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
    writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...config, num_hidden_layers: 3 }));
    await expect(loadModelDir(dir)).rejects.toThrow(/past_key_values\.2\.key/);
    writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...config, eos_token_id: 548 }));
    await expect(loadModelDir(dir)).rejects.toThrow(/<\|im_end\|>/);
  });

  const hasPythonOnnx = (() => {
    try {
      execFileSync("/usr/bin/python3", ["-c", "import onnx"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!hasPythonOnnx)("loads a model with external weights (staged beside hard links, nothing left behind)", async () => {
    const dir = scratchCopy();
    execFileSync("/usr/bin/python3", [
      "-c",
      "import onnx,sys; m=onnx.load(sys.argv[1]); onnx.save_model(m, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True, location='model.onnx.data', size_threshold=0)",
      path.join(dir, "model.onnx"),
    ]);
    expect(usesExternalData(readFileSync(path.join(dir, "model.onnx")))).toBe(true);
    const before = readdirSync(os.tmpdir()).filter((f) => f.startsWith("tessera-model-") && !f.startsWith("tessera-model-test-"));
    const model = await loadModelDir(dir, { intraOpThreads: 1 });
    try {
      expect(model.readout).toBe(true);
      expect(model.skippableHead).toBe(true);
      const after = readdirSync(os.tmpdir()).filter((f) => f.startsWith("tessera-model-") && !f.startsWith("tessera-model-test-"));
      expect(after).toEqual(before);
      expect(readdirSync(dir).filter((f) => f.startsWith("."))).toEqual([]);
      await readoutMatchesLogits(model);
    } finally {
      await model.close();
    }
  });
});
