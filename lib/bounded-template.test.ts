import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import { BoundedTemplate, TemplateBudgetError } from "./bounded-template.js";

const QWEN3 = readFileSync(join(import.meta.dirname, "../convert/templates/qwen3.jinja"), "utf8");
const conversation = (n: number) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `turn ${i}` }));
// The template: harmless on short chats, range(10**10) on a third message.
const RUNAWAY = "{% if messages|length > 2 %}{% for i in range(10**10) %}{% endfor %}{% endif %}";

const expectBudget = (source: string, vars: Record<string, unknown> = {}) => {
  const started = performance.now();
  expect(() => new BoundedTemplate(source).render(vars)).toThrow(TemplateBudgetError);
  return performance.now() - started;
};

describe("BoundedTemplate", () => {
  it("renders what @huggingface/jinja's Template renders (globals, tools, generation prompt)", () => {
    const vars = {
      messages: conversation(40),
      add_generation_prompt: true,
      enable_thinking: false,
      tools: [{ type: "function", function: { name: "search", description: "web", parameters: { type: "object" } } }],
    };
    expect(new BoundedTemplate(QWEN3).render(vars)).toBe(new Template(QWEN3).render(vars));
    expect(new BoundedTemplate("{{ range(3)|join(',') }} {{ range(5, 0, -2)|join(',') }} {{ True }} {{ none is none }}").render()).toBe(
      "0,1,2 5,3,1 true true",
    );
    expect(new BoundedTemplate("{{ strftime_now('%Y') }}").render()).toBe(String(new Date().getFullYear()));
    expect(() => new BoundedTemplate("{{ raise_exception('no system role') }}").render()).toThrow("no system role");
  });

  it("refuses range(10**10) before building it, only on the conversation that reaches it", () => {
    const template = new BoundedTemplate(RUNAWAY + QWEN3);
    expect(template.render({ messages: conversation(2), add_generation_prompt: true })).toContain("turn 1");
    expect(() => template.render({ messages: conversation(3) })).toThrow(/range\(\) of 10000000000 items/);
  });

  it("stops loops, growing strings and lists at the budget", () => {
    // Nested loops of allowed ranges: the deadline (1 s) plus one loop's set-up, on a loaded machine.
    expect(expectBudget("{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}")).toBeLessThan(8_000);
    expectBudget("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}");
    expectBudget("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}");
  });

  it("counts steps, deterministically", () => {
    const small = { steps: 1_000, chars: 1_000, items: 1_000, ms: 60_000 };
    const loop = (n: number) => new BoundedTemplate(`{% for i in range(${n}) %}{{ i }}{% endfor %}`, small);
    expect(loop(100).render()).toHaveLength(190);
    expect(() => loop(900).render()).toThrow(/budget of 1000 steps/);
  });
});
