// Decisions on a canvas model (docs/model-contract.md, "Decisions on a canvas model"): the
// Score readout of the tiny converted DiffusionGemma (canvas-score.ts on ONNX Runtime) against
// transformers' own DiffusionGemmaForBlockDiffusion on the same prompts and the same fixed
// noise canvases: the whole prompt encoded from scratch (no shared state cache, no chunks),
// the first denoising step, softmax at canvas position 0, averaged over the draws, the chain
// rule through the encoder for labels of several tokens.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { softmax } from "../../lib/decision-types/probabilities.js";
import { renderDecisionPrompt } from "../../lib/decision-types/render.js";
import { canvasScore } from "../../services/inference/canvas/canvas-score.js";
import { type CanvasEngine, loadCanvasEngine } from "../../services/inference/canvas/canvas-service.js";
import type * as ort from "onnxruntime-node";
import { emptyCache } from "../../services/inference/decoder/canvas/canvas-kv.js";
import { DECISION_DRAWS, decisionNoise, FirstTokenReadout } from "../../services/inference/decoder/canvas/canvas-readout.js";
import type { ScoreInput } from "../../services/inference/core/model-engine.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

// Each label's probability: the product over its tokens of the mean over the noise canvases of
// softmax(logits)[token] at canvas position 0, the prompt being the question and the label's
// earlier tokens. Printed as one JSON list per question (one value per label).
const REFERENCE = `
import json, sys, torch
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache
ckpt, cases = sys.argv[1], json.load(open(sys.argv[2]))
model = DiffusionGemmaForBlockDiffusion.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
noise = torch.tensor(cases["noise"], dtype=torch.long)
out = []
with torch.no_grad():
    for q in cases["questions"]:
        probs = []
        for label in q["labels"]:
            p = 1.0
            for k, token in enumerate(label):
                ids = torch.tensor([q["ids"] + label[:k]])
                mean = 0.0
                for canvas in noise:
                    cache = DynamicCache(config=model.config.text_config)
                    logits = model(input_ids=ids, past_key_values=cache, decoder_input_ids=canvas[None]).logits
                    mean += torch.softmax(logits[0, 0].double(), -1)[token].item() / len(noise)
                p *= mean
            probs.append(p)
        out.append([x / sum(probs) for x in probs])
print(json.dumps(out))
`;

const STATE = { order: "A-1092", note: "The weather in Paris is sunny today. The customer asks for the quick brown fox." };
const QUESTIONS = [
  { type: "noul", instructions: "Is the weather good?", criteria: { true: "sunny", false: "rain" } },
  { type: "choice", instructions: "Which city?", criteria: { Paris: null, London: "the capital", Rome: null } },
  { type: "score", criteria: ["low", "medium", "high", "very high"] },
];

describe.skipIf(!HAVE_CONVERT_VENV)("decisions on the tiny DiffusionGemma (canvas Score)", () => {
  const dir = mkdtempSync(join(tmpdir(), "dg-decision-"));
  let engine: CanvasEngine;
  let checkpoint: string;
  let input: ScoreInput;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    checkpoint = fx.checkpoint;
    engine = await loadCanvasEngine(fx.model, "dg", ["dg"], { slots: 2, queue: 4, intraOpThreads: 1 });
    const decision = engine.model.decision!;
    const rendered = QUESTIONS.map((q) => renderDecisionPrompt(decision, STATE, q));
    input = { prefix: rendered[0]!.prefix, suffixes: rendered.map((r) => ({ text: r.suffix, labels: r.labels })) };
  }, 300_000);
  afterAll(async () => {
    await engine?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const limits = { maxWorkTokens: 8192, maxRowTokens: 1024 };

  it("the label distribution equals transformers' on the same prompts and noise within 1e-3 (fp32), and sums to 1", async () => {
    const { tokenizer } = engine.model;
    const out = await canvasScore(engine, input, limits);
    const got = out.results.map((r) => softmax(r.logits));
    const cases = {
      noise: decisionNoise(engine.model.config).map((c) => Array.from(c)),
      questions: input.suffixes.map((s) => ({
        ids: tokenizer.encode(input.prefix + s.text),
        labels: s.labels.map((l) => tokenizer.encode(l)),
      })),
    };
    // Yes / No are two tokens each in the tiny vocabulary: the chain rule is exercised.
    expect(cases.questions[0]!.labels.every((l) => l.length === 2)).toBe(true);
    writeFileSync(join(dir, "cases.json"), JSON.stringify(cases));
    writeFileSync(join(dir, "reference.py"), REFERENCE);
    const { stdout } = await runConvertPython([join(dir, "reference.py"), checkpoint, join(dir, "cases.json")], 240_000);
    const want = JSON.parse(stdout.trim().split("\n").at(-1)!) as number[][];
    let worst = 0;
    got.forEach((p, i) => {
      expect(p).toHaveLength(want[i]!.length);
      expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
      p.forEach((x, j) => {
        worst = Math.max(worst, Math.abs(x - want[i]![j]!));
      });
    });
    expect(worst).toBeLessThan(1e-3);
    // Not a degenerate readout: some label of some question is far from uniform.
    expect(Math.max(...got.flat())).toBeGreaterThan(0.4);
    console.log(`canvas decision readout vs transformers: worst |Δp| ${worst.toExponential(2)}`);
  }, 300_000);

  it("several questions in one request equal each asked alone, to the last bit (batched forwards, one state cache)", async () => {
    // The last question has the score question's text (so its rows share that question's
    // forwards: 8 rows instead of 4) and its labels in another order.
    const score = input.suffixes[2]!;
    const suffixes = [...input.suffixes, { text: score.text, labels: [...score.labels].reverse() }];
    const together = await canvasScore(engine, { prefix: input.prefix, suffixes }, limits);
    const alone = await Promise.all(suffixes.map((s) => canvasScore(engine, { prefix: input.prefix, suffixes: [s] }, limits)));
    together.results.forEach((r, i) => {
      const single = alone[i]!.results[0]!;
      expect(single.suffixTokens).toBe(r.suffixTokens);
      expect(r.logits).toEqual(single.logits);
    });
    expect(together.prefixTokens).toBe(alone[0]!.prefixTokens);
    expect(together.results[3]!.logits).toEqual([...together.results[2]!.logits].reverse());
  }, 120_000);

  it("the head narrowed to canvas position 0 reads what the whole head read: same probabilities, 1/canvas of the logits", async () => {
    const { model } = engine;
    expect(model.narrowHead).toBe(true);
    const ids = engine.model.tokenizer.encode(input.prefix + input.suffixes[1]!.text);
    const cache = await engine.decoder.encode(emptyCache(model.config.layers), ids);
    const tokens = Array.from({ length: model.config.vocabSize }, (_, t) => t); // the whole distribution
    const read = async (wholeHead: boolean) => {
      const logitsSizes: number[] = [];
      const run = model.denoiser.run.bind(model.denoiser);
      model.denoiser.run = (async (feeds: ort.InferenceSession.FeedsType, fetches?: unknown) => {
        const out = await run(feeds, fetches as string[]);
        logitsSizes.push(out.logits!.data.length);
        return out;
      }) as typeof model.denoiser.run;
      let p: number[] = [];
      try {
        const readout = new FirstTokenReadout(model, { maxForwardTokens: 1024, wholeHead });
        await readout.add({ cache, tokens, done: (x) => (p = x) });
        await readout.flush();
      } finally {
        model.denoiser.run = run;
      }
      return { p, logitsSizes };
    };
    const whole = await read(true);
    const narrowed = await read(false);
    const { canvasLength: C, vocabSize: V } = model.config;
    expect(whole.logitsSizes).toEqual([DECISION_DRAWS * C * V]);
    expect(narrowed.logitsSizes).toEqual([DECISION_DRAWS * V]);
    expect(narrowed.p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    let worst = 0;
    narrowed.p.forEach((x, t) => {
      worst = Math.max(worst, Math.abs(x - whole.p[t]!));
    });
    expect(worst).toBeLessThan(1e-6);
  }, 60_000);

  it("limits: the work cap counts the canvases and is a 400 naming it; a state past the context names the context", async () => {
    // 3 questions: about 60 tokens each, 4 draws x 16 positions per label position read.
    await expect(canvasScore(engine, input, { maxWorkTokens: 200, maxRowTokens: 1024 })).rejects.toThrow(
      /tokens of model work .*4 denoising canvases of 16.*TESSERA_MAX_DECISION_WORK_TOKENS/,
    );
    const long = { prefix: "fox ".repeat(3000), suffixes: input.suffixes.slice(0, 1) };
    await expect(canvasScore(engine, long, { maxWorkTokens: 100_000, maxRowTokens: 1024 })).rejects.toThrow(
      /prompt too long: .*the context of model "dg" is 2032 tokens/,
    );
    const counted = await canvasScore(engine, { ...input, countOnly: true }, limits);
    expect(counted.results.every((r) => r.logits.length === 0 && r.suffixTokens > 0)).toBe(true);
  }, 60_000);
});
