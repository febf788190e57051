// The decoder on the real ONNX tiny model: the KV cache is exact (same tokens as recomputing
// every forward from position 0), prompts around block boundaries, the threshold extremes,
// and agreement with the Python reference decode written by training/model/make_test_model.py.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StopMatcher } from "../decoder/reply-text.js";
import type { Finished } from "../decoder/sequence.js";
import { createModelRuntime, DEFAULT_CPU_PREFILL_CHUNK, type ModelRuntime } from "./runtime.js";
import { loadModelDir, type ModelDir } from "./model-dir.js";
import type { GenerationEvent } from "./scheduler.js";
import { TINY_MODEL_DIR, recordingRunner, referenceGenerate, type RecordedForward } from "../../../test/helpers/inference-engine.js";

let model: ModelDir;
const engines: ModelRuntime[] = [];

beforeAll(async () => {
  model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1 });
});

afterAll(async () => {
  for (const e of engines) await e.scheduler.close();
  await model?.close();
});

function engineWith(policy: string, prefillChunk?: number): { engine: ModelRuntime; forwards: RecordedForward[] } {
  let forwards: RecordedForward[] = [];
  const engine = createModelRuntime({
    name: "tiny",
    servingIds: ["tiny"],
    model,
    slots: 8,
    queue: 8,
    policy,
    ...(prefillChunk !== undefined ? { prefillChunk } : {}),
    wrapRunner: (inner) => {
      const r = recordingRunner(inner);
      forwards = r.forwards;
      return r;
    },
  });
  engines.push(engine);
  return { engine, forwards };
}

async function generate(engine: ModelRuntime, prompt: number[], maxTokens: number) {
  const events: GenerationEvent[] = [];
  const stream = await engine.scheduler.generate({
    prompt,
    maxTokens,
    policy: engine.policy,
    stops: new StopMatcher([]),
    decode: model.tokenizer.decode,
  });
  for await (const e of stream) events.push(e);
  const last = events.at(-1)!;
  if (last.type !== "finished") throw new Error("no finished event");
  return { finished: last.finished as Finished, forwardPasses: last.forwardPasses, events };
}

/** A prompt of `length` tokens cut from a chat turn, so it looks like real input. */
function promptOf(length: number): number[] {
  const turn = model.tokenizer.encode(
    "<|im_start|>user\nThe quick brown fox jumps over the lazy dog. Use the word in a sentence: the weather is nice today, and the children are playing in the garden with their friends. Synonyms and opposites of happy are glad, cheerful, sad and unhappy.<|im_end|>\n<|im_start|>assistant\n",
  );
  return Array.from({ length }, (_, i) => turn[i % turn.length]!);
}

describe("KV cache", () => {
  it.each([1, 63, 64, 65, 127, 128, 129])(
    "a %i-token prompt gives exactly the tokens of recomputing every forward from scratch",
    async (length) => {
      const { engine } = engineWith("threshold(0.9)");
      const prompt = promptOf(length);
      const maxTokens = 160;
      const got = await generate(engine, prompt, maxTokens);
      const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens, policy: engine.policy });
      expect(got.finished.tokens).toEqual(want.tokens);
      expect(got.finished.reason).toBe(want.reason);
      // One prefill forward when the prompt has a complete block, then one forward per step.
      expect(got.forwardPasses).toBe(want.steps + (length >= 64 ? 1 : 0));
    },
  );

  it("is exact over many blocks (a reply that runs to max_tokens)", async () => {
    const { engine } = engineWith("threshold(0.9)");
    const prompt = model.tokenizer.encode("<|im_start|>user\n2+2=?<|im_end|>\n<|im_start|>assistant\n");
    const got = await generate(engine, prompt, 250);
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 250, policy: engine.policy });
    expect(got.finished).toMatchObject({ reason: "length", completionTokens: 250 });
    expect(got.finished.tokens).toEqual(want.tokens);
    // A text event per completed block: the prompt's 22-token tail + 250 reply tokens make
    // 4 complete blocks; the 5th is cut at max_tokens and ends in the finished event.
    expect(got.events.filter((e) => e.type === "block").map((e) => (e.type === "block" ? e.block.blockIndex : -1))).toEqual([0, 1, 2, 3]);
  });

  it("prefills a long prompt in whole-block chunks and stays exact", async () => {
    const { engine, forwards } = engineWith("threshold(0.9)", 100); // rounded down to one block
    const prompt = promptOf(200);
    const got = await generate(engine, prompt, 80);
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 80, policy: engine.policy });
    expect(got.finished.tokens).toEqual(want.tokens);
    const prefills = forwards.filter((f) => f.fetch.present && f.seq === 64 && f.past < 192).slice(0, 3);
    expect(prefills.map((f) => f.past)).toEqual([0, 64, 128]);
    expect(got.forwardPasses).toBe(3 + want.steps);
    // The prefills read no logits, so they skip the output head (onnx-head.ts); every other forward reads the readout.
    const ours = forwards.slice(0, got.forwardPasses);
    expect(ours.slice(0, 3).map((f) => f.fetch)).toEqual(Array(3).fill({ present: true, output: "none" }));
    expect(ours.slice(3).every((f) => f.fetch.output === "readout")).toBe(true);
  });

  it("prefills in chunks of 512 tokens on the CPU by default, and a prompt in chunks equals it in one forward", async () => {
    const prompt = promptOf(1100);
    const { engine, forwards } = engineWith("threshold(0.9)");
    expect(engine.prefillChunk).toBe(DEFAULT_CPU_PREFILL_CHUNK);
    const got = await generate(engine, prompt, 40);
    const prefills = forwards.filter((f) => f.fetch.present && f.fetch.output === "none");
    expect(prefills.map((f) => [f.past, f.seq])).toEqual([
      [0, 512],
      [512, 512],
      [1024, 64],
    ]);
    const whole = engineWith("threshold(0.9)", 2048);
    expect((await generate(whole.engine, prompt, 40)).finished.tokens).toEqual(got.finished.tokens);
    expect(whole.forwards.filter((f) => f.fetch.present && f.fetch.output === "none").map((f) => f.seq)).toEqual([1088]);
  });
});

describe("threshold", () => {
  it("above 1 commits exactly one token per step", async () => {
    const { engine, forwards } = engineWith("threshold(1.01)");
    const prompt = promptOf(64);
    const got = await generate(engine, prompt, 70);
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 70, policy: engine.policy });
    expect(want.committedPerStep.every((n) => n === 1)).toBe(true);
    expect(got.finished.tokens).toEqual(want.tokens);
    expect(forwards.filter((f) => f.past === 0 && f.seq === 64)).toHaveLength(1); // the prefill
    expect(got.forwardPasses).toBe(1 + want.steps);
    expect(want.steps).toBeGreaterThanOrEqual(got.finished.completionTokens);
  });

  it("at 0 fills a whole block in one step", async () => {
    const { engine } = engineWith("threshold(0)");
    const prompt = promptOf(64);
    const got = await generate(engine, prompt, 200);
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 200, policy: engine.policy });
    expect(got.finished.tokens).toEqual(want.tokens);
    expect(want.committedPerStep.every((n) => n === 64)).toBe(true);
    expect(got.forwardPasses).toBe(1 + Math.ceil(got.finished.completionTokens / 64));
  });

  it("at 0.9 commits several tokens in some steps (the model is sometimes confident)", async () => {
    const { engine } = engineWith("threshold(0.9)");
    const prompt = model.tokenizer.encode("<|im_start|>user\n2+2=?<|im_end|>\n<|im_start|>assistant\n");
    const want = await referenceGenerate(model, engine.runner, prompt, { maxTokens: 192, policy: engine.policy });
    expect(Math.max(...want.committedPerStep)).toBeGreaterThan(1);
  });
});

describe("agreement with the Python reference decode", () => {
  // training/model/make_test_model.py decodes these prompts in PyTorch (no KV cache) and records
  // where <|im_end|> falls (test/fixtures/tiny-model/README.md); null: not within 192 tokens.
  const PYTHON: Record<string, number | null> = {
    "Hello, who are you?": 97,
    "What does serendipity mean?": 127,
    "Write a poem about the sea.": 79,
    "2+2=?": null,
    "Tell me a story about a dog named Rex who lived in Paris.": 41,
    hi: 6,
    "Reply in JSON": 26,
    "What is the capital of France?": 15,
  };

  it("ends every reply where PyTorch does, all 8 decoded concurrently in shared batches", async () => {
    const { engine, forwards } = engineWith("threshold(0.9)");
    const results = await Promise.all(
      Object.keys(PYTHON).map((p) =>
        generate(engine, model.tokenizer.encode(`<|im_start|>user\n${p}<|im_end|>\n<|im_start|>assistant\n`), 192),
      ),
    );
    Object.values(PYTHON).forEach((at, i) => {
      expect(results[i]!.finished).toMatchObject(
        at === null ? { reason: "length", completionTokens: 192 } : { reason: "stop", completionTokens: at },
      );
    });
    expect(Math.max(...forwards.map((f) => f.batch))).toBe(8);
  });
});
