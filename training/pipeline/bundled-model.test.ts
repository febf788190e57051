// The shipped model directory (models/tessera-bd-small) against docs/model-contract.md, loaded
// the way the engine loads it: @huggingface/tokenizers, onnxruntime-node, decision.json.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { DecisionQuestionJson } from "../../lib/decision-types/registry.js";
import { renderDecisionPrompt as serviceRender } from "../../lib/decision-types/render.js";

const dir = new URL("../../models/tessera-bd-small/", import.meta.url);
const readJson = (name: string) => JSON.parse(readFileSync(new URL(name, dir), "utf8"));
const config = readJson("config.json");
const decision = readJson("decision.json");
const tokenizerConfig = readJson("tokenizer_config.json");
const tokenizer = new Tokenizer(readJson("tokenizer.json"), tokenizerConfig);
const encode = (s: string): number[] => tokenizer.encode(s, { add_special_tokens: false }).ids;
const SPECIALS = [
  "<|pad|>",
  "<|mask|>",
  "<|im_start|>",
  "<|im_end|>",
  "<|endoftext|>",
  "<think>",
  "</think>",
  "<tool_call>",
  "</tool_call>",
  "<tool_response>",
  "</tool_response>",
  "<|yes|>",
  "<|no|>",
  ...Array.from({ length: 128 }, (_, i) => `<|opt_${i}|>`),
];
const BS = 64;

let session: ort.InferenceSession;
beforeAll(async () => {
  session = await ort.InferenceSession.create(new URL(config.onnx_file, dir).pathname, { intraOpNumThreads: 1 });
});

/** One forward: `ids` at positions past..past+S-1 after `past` cached tokens (block-causal). */
async function forward(ids: number[], pastLen: number, pastKv: Record<string, ort.Tensor> | null) {
  const S = ids.length;
  const T = pastLen + S;
  const mask = new Float32Array(S * T).fill(-1e9);
  for (let q = 0; q < S; q++) {
    for (let k = 0; k < T; k++) if (Math.floor(k / BS) <= Math.floor((pastLen + q) / BS)) mask[q * T + k] = 0;
  }
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, S]),
    position_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map((_, i) => BigInt(pastLen + i))), [1, S]),
    attention_mask: new ort.Tensor("float32", mask, [1, 1, S, T]),
  };
  for (let l = 0; l < config.num_hidden_layers; l++) {
    for (const kv of ["key", "value"]) {
      feeds[`past_key_values.${l}.${kv}`] =
        pastKv?.[`present.${l}.${kv}`] ??
        new ort.Tensor("float32", new Float32Array(0), [1, config.num_key_value_heads, 0, config.head_dim]);
    }
  }
  return session.run(feeds);
}

function lastRow(out: ort.InferenceSession.OnnxValueMapType, S: number): Float32Array {
  const V = config.vocab_size;
  return (out.logits!.data as Float32Array).subarray((S - 1) * V, S * V);
}

function softmax(xs: number[], t: number): number[] {
  const m = Math.max(...xs.map((x) => x / t));
  const e = xs.map((x) => Math.exp(x / t - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

async function decide(state: string, question: DecisionQuestionJson): Promise<number[]> {
  const { prefix, suffix, labels } = serviceRender(decision, state, question);
  const ids = [...encode(prefix + suffix), config.mask_token_id];
  const row = lastRow(await forward(ids, 0, null), ids.length);
  return softmax(
    labels.map((l) => row[encode(l)[0]!]!),
    decision.temperatures[question.type],
  );
}

describe("models/tessera-bd-small", () => {
  it("has the contract's config and special tokens as single tokens", () => {
    expect(config.model_type).toBe("tessera-block-diffusion");
    expect(config.block_size).toBe(64);
    expect(config.onnx_file).toBe("model.onnx");
    expect(config.capabilities).toEqual({ images: false, tools: true, thinking: true });
    for (const s of SPECIALS) expect(encode(s), s).toHaveLength(1);
    expect(encode("<|mask|>")[0]).toBe(config.mask_token_id);
    expect(encode("<|im_end|>")[0]).toBe(config.eos_token_id);
    expect(encode("<|pad|>")[0]).toBe(config.pad_token_id);
    expect(Math.max(...SPECIALS.map((s) => encode(s)[0]!))).toBeLessThan(config.vocab_size);
    expect(tokenizer.decode(encode("héllo <|yes|> wörld\n\tx"), { skip_special_tokens: false })).toBe("héllo <|yes|> wörld\n\tx");
  });

  it("ships the chat template and decision templates it was trained on", () => {
    expect(tokenizerConfig.chat_template).toBe(readFileSync(new URL("../templates/chat_template.jinja", import.meta.url), "utf8"));
    const templates = JSON.parse(readFileSync(new URL("../templates/decision.json", import.meta.url), "utf8"));
    // This model was trained with the prefix template's final newline left out (see its README).
    expect(decision.prefix_template).toBe(templates.prefix_template.replace(/\n$/, ""));
    expect({ ...decision, temperatures: templates.temperatures, prefix_template: templates.prefix_template }).toEqual(templates);
    for (const t of ["noul", "choice", "score"]) expect(decision.temperatures[t]).toBeGreaterThan(0);
  });

  it("renders decisions in training with the service's own module, not a second renderer", async () => {
    // @ts-expect-error plain ESM module without types
    const trainingRender = await import("../data-src/render.mjs");
    expect(Object.keys(trainingRender)).not.toContain("renderDecisionPrompt");
    const importsOf = (script: string) => readFileSync(new URL(script, import.meta.url), "utf8");
    expect(importsOf("./check-bundle.mjs")).toContain('import { renderDecisionPrompt } from "../../lib/decision-types/render.ts";');
    expect(importsOf("../data-src/decision-record.mjs")).toContain(
      'import { renderDecisionPrompt } from "../../lib/decision-types/render.ts";',
    );
    for (const script of ["./prepare-data.mjs", "../v2/prepare-v2.mjs"]) {
      expect(importsOf(script)).toContain('from "../data-src/decision-record.mjs";');
    }
  });

  it("has the contract's ONNX inputs and outputs", () => {
    const L = config.num_hidden_layers;
    expect(session.inputNames).toEqual([
      "input_ids",
      "position_ids",
      "attention_mask",
      ...Array.from({ length: L }, (_, l) => [`past_key_values.${l}.key`, `past_key_values.${l}.value`]).flat(),
    ]);
    expect(session.outputNames).toEqual([
      "logits",
      ...Array.from({ length: L }, (_, l) => [`present.${l}.key`, `present.${l}.value`]).flat(),
    ]);
  });

  it("gives the same slot logits with the prefix's blocks cached as recomputed from scratch", async () => {
    const { prefix, suffix } = serviceRender(
      decision,
      `From: a@b.c\nSubject: meeting\n\n${"Let us meet on Thursday at ten to go over the plan. ".repeat(4)}`,
      { type: "noul", instructions: "Is this email spam?" },
    );
    const ids = [...encode(prefix + suffix), config.mask_token_id];
    const full = lastRow(await forward(ids, 0, null), ids.length);
    const cached = Math.floor((ids.length - 1) / BS) * BS;
    expect(cached).toBeGreaterThan(0);
    const pre = await forward(ids.slice(0, cached), 0, null);
    const tail = ids.slice(cached);
    const inc = lastRow(await forward(tail, cached, pre as Record<string, ort.Tensor>), tail.length);
    let worst = 0;
    for (let v = 0; v < config.vocab_size; v++) worst = Math.max(worst, Math.abs(full[v]! - inc[v]!));
    expect(worst).toBeLessThan(1e-3);
  });

  it("answers plain decisions sensibly", async () => {
    const spam = await decide(
      "From: Deals <offers@cheap-meds.biz>\nSubject: LOWEST PRICES - order now!!!\n\nBuy cheap meds online, no prescription needed. Click here to claim your FREE bonus. Limited offer, act now!",
      { type: "noul", instructions: "Is this email spam?" },
    );
    const ham = await decide(
      "From: Alice Martin <alice@example.org>\nSubject: Re: notes from Tuesday\n\nHi Bob,\n\nthanks for the notes. Can we go over the schedule on Thursday after lunch?\n\nAlice",
      { type: "noul", instructions: "Is this email spam?" },
    );
    expect(spam[0]).toBeGreaterThan(0.5);
    expect(ham[0]).toBeLessThan(0.5);
    const pos = await decide("The food was amazing and the staff were so friendly.", {
      type: "choice",
      instructions: "What is the sentiment of this review?",
      criteria: { negative: null, positive: null },
    });
    expect(pos[1]).toBeGreaterThan(0.5);
    expect(pos[0]! + pos[1]!).toBeCloseTo(1, 9);
  });
});
