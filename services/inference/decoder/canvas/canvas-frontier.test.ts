import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV } from "../../../../test/helpers/converted-models.js";
import { diffusionGemmaFixture } from "../../../../test/convert/diffusion-gemma-fixture.js";
import { startCanvasGrammar } from "../../canvas/canvas-grammar.js";
import { DEFAULT_GRAMMAR_OPTIONS } from "../../grammar/model-grammars.js";
import type { GrammarSpec } from "../../grammar/grammar-spec.js";
import { CanvasDecoder, type CanvasStepEvent, seededDraws } from "./canvas-decoder.js";
import { type CanvasModel, loadCanvasModel } from "./canvas-model.js";

const schema = {
  type: "object",
  properties: { name: { type: "string" }, age: { type: "integer" }, tags: { type: "array", items: { type: "string" } } },
  required: ["name", "age", "tags"],
  additionalProperties: false,
};

describe.skipIf(!HAVE_CONVERT_VENV)("the grammar on a canvas: a frozen frontier (tiny random DiffusionGemma)", () => {
  let model: CanvasModel;
  const prompt = (text: string) =>
    model.tokenizer.encode(model.renderChat({ messages: [{ role: "user", content: text }], add_generation_prompt: true }));
  const start = (spec: GrammarSpec, mode: "start" | "auto", maxTokens: number) =>
    startCanvasGrammar(model, DEFAULT_GRAMMAR_OPTIONS, { spec, mode, promptSuffix: "" }, maxTokens);
  beforeAll(async () => {
    model = await loadCanvasModel((await diffusionGemmaFixture()).model, { intraOpThreads: 1 });
  }, 300_000);
  afterAll(async () => {
    await model?.close();
  });

  it("the reply is a value of the schema that ends with stop; a committed position is never renoised; forced text costs no step", async () => {
    const C = model.config.canvasLength;
    for (const seed of [1, 2]) {
      const steps: CanvasStepEvent[] = [];
      const r = await new CanvasDecoder(model).generate({
        promptIds: prompt("Describe a user."),
        maxTokens: 400,
        draws: seededDraws(seed),
        constraint: await start({ kind: "json_schema", schema }, "start", 400),
        onStep: (e) => steps.push(e),
      });
      expect(r.finishReason).toBe("stop");
      expect(new Ajv().validate(schema, JSON.parse(model.tokenizer.decode(r.tokens)))).toBe(true);
      // Each step's draft starts with the reply's committed tokens in its canvas, and the frontier only moves right.
      let previous = 0;
      for (const e of steps) {
        const f = e.committed!;
        expect(f).toBeGreaterThan(previous);
        // (The reply leaves out the end of turn the last canvas committed.)
        const kept = r.tokens.slice(e.canvasIndex * C, e.canvasIndex * C + f);
        expect(e.draft.slice(0, kept.length)).toEqual(kept);
        expect(e.acceptedMask.slice(0, f).every(Boolean)).toBe(true);
        previous = e.last ? 0 : f;
      }
      // Keys and punctuation were committed by jump-forward, so there are fewer steps than tokens.
      expect(r.grammar!.forced).toBeGreaterThan(10);
      expect(r.steps).toBeLessThan(r.tokens.length);
      expect(r.grammar!.deadEnd).toBe(false);
    }
  }, 120_000);

  it("auto: a free canvas holding the trigger is cut after it, and the reply goes on under the opened grammar", async () => {
    const ids = prompt("Hello");
    const free = await new CanvasDecoder(model).generate({ promptIds: ids, maxTokens: 16, draws: seededDraws(9) });
    const trigger = free.tokens[4]!;
    const cut = free.tokens.indexOf(trigger);
    let openedWith: number | undefined;
    const base = await start({ kind: "json_object" }, "auto", 300);
    const r = await new CanvasDecoder(model).generate({
      promptIds: ids,
      maxTokens: 300,
      draws: seededDraws(9),
      constraint: {
        endToken: base.endToken,
        trigger: {
          token: trigger,
          open: (left) => {
            openedWith = left;
            return base.trigger!.open(left);
          },
        },
      },
    });
    // The first canvas is the free one (same draws), up to and including the trigger; then a JSON object.
    expect(r.tokens.slice(0, cut + 1)).toEqual(free.tokens.slice(0, cut + 1));
    expect(openedWith).toBe(300 - (cut + 1));
    expect(r.finishReason).toBe("stop");
    const value = JSON.parse(model.tokenizer.decode(r.tokens.slice(cut + 1))) as unknown;
    expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
  }, 120_000);

  it("committed tokens stream as each step commits them, before their canvas ends; the canvas callback gets only the rest", async () => {
    const events: string[] = [];
    const pieces: number[] = [];
    const rests: number[] = [];
    const r = await new CanvasDecoder(model).generate({
      promptIds: prompt("Describe a user."),
      maxTokens: 400,
      draws: seededDraws(4),
      constraint: await start({ kind: "json_schema", schema }, "start", 400),
      onStep: (e) => events.push(e.last ? "last" : "step"),
      onCommitted: (p) => {
        events.push("piece");
        pieces.push(...p.tokens);
      },
      onCanvas: (c) => {
        rests.push(...c.tokens);
        return undefined;
      },
    });
    expect(r.finishReason).toBe("stop");
    expect([...pieces, ...rests]).toEqual(r.tokens);
    expect(pieces.length).toBe(r.tokens.length);
    // Pieces arrive between the steps of a canvas, not only at its end.
    expect(events.slice(0, 3)).toEqual(["piece", "step", "piece"]);
  }, 120_000);

  it("max_tokens cuts a constrained reply with length, its text a valid prefix", async () => {
    const r = await new CanvasDecoder(model).generate({
      promptIds: prompt("Describe a user."),
      maxTokens: 20,
      draws: seededDraws(3),
      constraint: await start(
        { kind: "json_schema", schema: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } },
        "start",
        20,
      ),
    });
    expect(r.tokens.length).toBeLessThanOrEqual(20);
    expect(model.tokenizer.decode(r.tokens).startsWith('{"a": ')).toBe(true);
  }, 60_000);
});
