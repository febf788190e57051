import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DecisionConfigError, parseDecisionConfig } from "./model-config.js";
import { DecisionRenderError, valueToText } from "./question-type.js";
import { compileDecisionConfig, DecisionTypeUnsupported, renderDecisionPrompt } from "./render.js";

const decisionJson = JSON.parse(readFileSync(new URL("../../training/templates/decision.json", import.meta.url), "utf8"));
const TAIL = "<|im_end|>\n<|im_start|>assistant\n";

describe("valueToText", () => {
  it("keeps strings, writes everything else as compact JSON in the order sent, null/absent empty", () => {
    expect(valueToText("a {{ b }} \n ü")).toBe("a {{ b }} \n ü");
    expect(valueToText({ z: 1, a: [true, null, "x"], m: { é: 1.5 } })).toBe('{"z":1,"a":[true,null,"x"],"m":{"é":1.5}}');
    expect(valueToText([1, "2"])).toBe('[1,"2"]');
    expect(valueToText(null)).toBe("");
    expect(valueToText(undefined)).toBe("");
    expect(valueToText(JSON.parse('{"__proto__":{"x":1},"constructor":2}'))).toBe('{"__proto__":{"x":1},"constructor":2}');
  });
});

describe("renderDecisionPrompt with the repository's decision.json", () => {
  it("renders the state into the prefix, taken literally (no template evaluation of values)", () => {
    const r = renderDecisionPrompt(decisionJson, "The {{ state }} is {% raw %}", { type: "noul" });
    expect(r.prefix).toBe(
      "<|im_start|>system\nAnswer the question about the state below.<|im_end|>\n<|im_start|>user\nState:\nThe {{ state }} is {% raw %}\n",
    );
    expect(renderDecisionPrompt(decisionJson, { b: 1, a: [2] }, { type: "noul" }).prefix).toContain('State:\n{"b":1,"a":[2]}\n');
  });

  it("renders noul with defaults, instructions and one or both sides", () => {
    const plain = renderDecisionPrompt(decisionJson, "s", { type: "noul" });
    expect(plain.suffix).toBe(`\nQuestion: Is this true of the state?\nAnswer yes or no.${TAIL}`);
    expect(plain.labels).toEqual(["<|yes|>", "<|no|>"]);
    const full = renderDecisionPrompt(decisionJson, "s", {
      type: "noul",
      instructions: "Is it spam?",
      criteria: { true: "unsolicited", false: { kind: "ham" } },
    });
    expect(full.suffix).toBe(`\nQuestion: Is it spam?\nYes means: unsolicited\nNo means: {"kind":"ham"}\nAnswer yes or no.${TAIL}`);
    const oneSide = renderDecisionPrompt(decisionJson, "s", { type: "noul", criteria: { false: "not spam" } });
    expect(oneSide.suffix).toBe(`\nQuestion: Is this true of the state?\nNo means: not spam\nAnswer yes or no.${TAIL}`);
    expect(renderDecisionPrompt(decisionJson, "s", { type: "noul", criteria: null }).suffix).toBe(plain.suffix);
  });

  it("renders choice options one per line, in the order sent, with labels opt_0…", () => {
    const r = renderDecisionPrompt(decisionJson, "s", {
      type: "choice",
      instructions: ["pick", 1],
      criteria: { "rouge 🍎": "a red fruit", b: null, "3": { x: 1 } },
    });
    // JavaScript objects list integer-like keys first; the pair form keeps any order.
    expect(r.suffix).toBe(
      `\nQuestion: ["pick",1]\nOptions:\n<|opt_0|> 3: {"x":1}\n<|opt_1|> rouge 🍎: a red fruit\n<|opt_2|> b\nAnswer with the label of one option.${TAIL}`,
    );
    expect(r.labels).toEqual(["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"]);
    const pairs = renderDecisionPrompt(decisionJson, "s", {
      type: "choice",
      criteria: [
        ["b", "second"],
        ["a", undefined],
      ],
    });
    expect(pairs.suffix).toBe(
      `\nQuestion: Which option fits the state best?\nOptions:\n<|opt_0|> b: second\n<|opt_1|> a\nAnswer with the label of one option.${TAIL}`,
    );
  });

  it("renders score levels lowest first", () => {
    const r = renderDecisionPrompt(decisionJson, "s", { type: "score", criteria: ["low", "mid", "high"] });
    expect(r.suffix).toBe(
      `\nQuestion: Rate the state on this scale.\nLevels, lowest first:\n<|opt_0|> low\n<|opt_1|> mid\n<|opt_2|> high\nAnswer with the label of one level.${TAIL}`,
    );
    expect(r.labels).toEqual(["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"]);
  });

  it("takes up to as many options as the model has labels, and says so beyond", () => {
    const options = Object.fromEntries(Array.from({ length: 128 }, (_, i) => [`o${i}`, null]));
    const r = renderDecisionPrompt(decisionJson, "s", { type: "choice", criteria: options });
    expect(r.labels).toHaveLength(128);
    expect(r.labels[127]).toBe("<|opt_127|>");
    expect(r.suffix).toContain("<|opt_127|> o127\n");
    const tooMany = { ...options, extra: null };
    expect(() => renderDecisionPrompt(decisionJson, "s", { type: "choice", criteria: tooMany })).toThrow(DecisionRenderError);
    const levels = Array.from({ length: 11 }, (_, i) => `l${i}`);
    expect(() => renderDecisionPrompt(decisionJson, "s", { type: "score", criteria: levels })).toThrow(/at most 10/);
  });

  it("keeps a template's own final newline and its newlines after block tags", () => {
    const c = compileDecisionConfig({
      ...decisionJson,
      prefix_template: "{% if state %}S={{ state }}{% endif %}\n\n",
      question_templates: { ...decisionJson.question_templates, noul: "Q\n{% for x in [1,2] %}{{ x }}\n{% endfor %}" },
    });
    expect(c.renderPrefix("x")).toBe("S=x\n\n");
    expect(c.renderQuestion({ type: "noul" }).suffix).toBe("Q\n1\n2\n");
  });

  it("is the same function of its input however often it is called (templates cached per config)", () => {
    const q = { type: "score" as const, criteria: ["a", "b"] };
    expect(renderDecisionPrompt(decisionJson, "s", q)).toEqual(renderDecisionPrompt(structuredClone(decisionJson), "s", q));
  });
});

describe("parseDecisionConfig", () => {
  it("reads the repository's decision.json", () => {
    const c = parseDecisionConfig(decisionJson);
    expect(c.labels.choice).toHaveLength(128);
    expect(c.labels.score).toHaveLength(10);
    expect(c.temperatures).toEqual({ noul: 1, choice: 1, score: 1 });
  });

  it("rejects malformed configs with a clear message", () => {
    expect(() => parseDecisionConfig(null)).toThrow(DecisionConfigError);
    expect(() => parseDecisionConfig({ ...decisionJson, version: 2 })).toThrow(/version/);
    expect(() => parseDecisionConfig({ ...decisionJson, temperatures: { noul: 0 } })).toThrow(/temperatures.noul/);
    expect(() => parseDecisionConfig({ ...decisionJson, labels: { ...decisionJson.labels, noul: ["<|yes|>"] } })).toThrow(/labels.noul/);
    expect(() => parseDecisionConfig({ ...decisionJson, question_templates: { ...decisionJson.question_templates, score: 3 } })).toThrow(
      /question_templates.score/,
    );
  });

  it("reads a decision.json without a type's template as a model that does not answer that type", () => {
    const { score: _, ...templates } = decisionJson.question_templates;
    const c = compileDecisionConfig({ ...decisionJson, question_templates: templates });
    expect(c.renderQuestion({ type: "noul" }).labels).toEqual(["<|yes|>", "<|no|>"]);
    expect(() => c.renderQuestion({ type: "score", criteria: ["low", "high"] })).toThrow(DecisionTypeUnsupported);
    expect(() => parseDecisionConfig({ ...decisionJson, question_templates: {} })).toThrow(/a template for none of noul, choice, score/);
  });

  it("defaults missing temperatures to 1", () => {
    const { temperatures: _t, ...rest } = decisionJson;
    expect(parseDecisionConfig({ ...rest, temperatures: { choice: 0.5 } }).temperatures).toEqual({ noul: 1, choice: 0.5, score: 1 });
  });
});
