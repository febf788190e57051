// Every unmasking policy on the real ONNX tiny model: the KV-cached, batched engine gives
// exactly the tokens of the no-cache reference decoder asking the same policy (prompts
// around block boundaries and chat prompts that end), one prefill plus one forward per step,
// the same tokens when sequences of different policies share batches, and a policy reading
// top-k from the logits agrees with the greedy readout.
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UnmaskPolicy } from "./policy.js";
import { buildPolicy } from "./registry.js";
import { StopMatcher } from "../reply-text.js";
import { createModelRuntime, type ModelRuntime } from "../../engine/runtime.js";
import { engineMetrics } from "../../core/metrics.js";
import { loadModelDir, type ModelDir } from "../../engine/model-dir.js";
import { recordingRunner, referenceGenerate, TINY_MODEL_DIR, type RecordedForward } from "../../../../test/helpers/inference-engine.js";

let model: ModelDir;
let engine: ModelRuntime;
let forwards: RecordedForward[] = [];
const registry = new Registry();

beforeAll(async () => {
  model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1 });
  engine = createModelRuntime({
    name: "tiny",
    servingIds: ["tiny"],
    model,
    slots: 16,
    queue: 16,
    metrics: engineMetrics(registry),
    wrapRunner: (inner) => {
      const r = recordingRunner(inner);
      forwards = r.forwards;
      return r;
    },
  });
});

afterAll(async () => {
  await engine?.scheduler.close();
  await model?.close();
});

async function generate(prompt: number[], maxTokens: number, policy: UnmaskPolicy) {
  const stream = await engine.scheduler.generate({ prompt, maxTokens, policy, stops: new StopMatcher([]), decode: model.tokenizer.decode });
  for await (const e of stream) if (e.type === "finished") return { ...e.finished, forwardPasses: e.forwardPasses };
  throw new Error("no finished event");
}

const chat = (text: string) => model.tokenizer.encode(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`);

/** A prompt of `length` tokens cut from a chat turn. */
function promptOf(length: number): number[] {
  const turn = chat("The quick brown fox jumps over the lazy dog. Synonyms and opposites of happy are glad, cheerful, sad and unhappy.");
  return Array.from({ length }, (_, i) => turn[i % turn.length]!);
}

const SPECS = [
  "sequential",
  "threshold(0.9)",
  "fill(0.5)+threshold(0.9)",
  "credit(bound=1.5,steps=3)",
  "subblocks(16)+threshold(0.9)",
  "fill(0.2)+subblocks(8)+credit(bound=1.5)+threshold(0.7)",
];

describe.each(SPECS)("%s", (spec) => {
  const policy = buildPolicy(spec);

  it("gives exactly the tokens of recomputing every forward from scratch, around block boundaries", async () => {
    for (const length of [63, 65, 129]) {
      const prompt = promptOf(length);
      const got = await generate(prompt, 90, policy);
      const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 90, policy });
      expect(got.tokens).toEqual(want.tokens);
      expect(got.reason).toBe(want.reason);
      expect(got.forwardPasses).toBe(want.steps + (length >= 64 ? 1 : 0));
      expect(Math.min(...want.committedPerStep)).toBeGreaterThanOrEqual(1);
    }
  });

  it("is exact on replies that end, decoded together in shared batches", async () => {
    const prompts = ["hi", "What is the capital of France?", "Reply in JSON", "Write a poem about the sea."].map(chat);
    const got = await Promise.all(prompts.map((p) => generate(p, 100, policy)));
    for (const [i, prompt] of prompts.entries()) {
      const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 100, policy });
      expect(got[i]!.tokens).toEqual(want.tokens);
      expect(got[i]!.reason).toBe(want.reason);
    }
    expect(got.some((r) => r.reason === "stop")).toBe(true);
  });
});

describe("policies side by side", () => {
  it("sequences of different policies share batches and each gets its own tokens", async () => {
    const prompt = chat("What does serendipity mean?");
    const alone = [];
    for (const spec of SPECS) alone.push((await generate(prompt, 80, buildPolicy(spec))).tokens);
    const before = forwards.length;
    const together = await Promise.all(SPECS.map((spec) => generate(prompt, 80, buildPolicy(spec))));
    expect(together.map((r) => r.tokens)).toEqual(alone);
    expect(Math.max(...forwards.slice(before).map((f) => f.batch))).toBe(SPECS.length);
  });

  it("a policy that reads the top-k from the logits decides as the greedy readout does", async () => {
    const threshold = buildPolicy("threshold(0.9)");
    const top3: UnmaskPolicy = {
      name: "top3-threshold",
      topK: 3,
      choose: (ctx) => {
        for (const g of ctx.guesses) {
          expect(g.top).toHaveLength(3);
          expect(g.top![0]!.token).toBe(g.token);
        }
        return threshold.choose(ctx);
      },
    };
    const prompt = chat("Tell me a story about a dog named Rex who lived in Paris.");
    const before = forwards.length;
    const [withTop, plain] = await Promise.all([generate(prompt, 70, top3), generate(prompt, 70, threshold)]);
    expect(withTop.tokens).toEqual(plain.tokens);
    // The shared forwards fetched both the readout and the logits.
    expect(forwards.slice(before).some((f) => f.fetch.output === "readout+logits")).toBe(true);
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 70, policy: top3 });
    expect(withTop.tokens).toEqual(want.tokens);
  });
});

describe("metrics", () => {
  it("count the positions each denoising forward commits and the forwards of each block, by policy", async () => {
    const policy = buildPolicy("fill(0.3)+threshold(0.8)");
    const prompt = chat("hi");
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 100, policy });
    await generate(prompt, 100, policy);
    const values = async (name: string) =>
      (await registry.getSingleMetric(name)!.get()).values
        .filter((v) => v.labels.policy === policy.name)
        .map((v) => ({ ...v, metricName: (v as { metricName?: string }).metricName }));
    const committed = await values("tessera_committed_tokens_per_forward");
    expect(committed.find((v) => v.metricName?.endsWith("_count"))?.value).toBe(want.steps);
    expect(committed.find((v) => v.metricName?.endsWith("_sum"))?.value).toBe(want.committedPerStep.reduce((a, b) => a + b, 0));
    const blocks = await values("tessera_forwards_per_block");
    expect(blocks.find((v) => v.metricName?.endsWith("_sum"))?.value).toBe(want.steps);
  });
});
