// Renders a decision prompt from the model's decision.json templates, exactly as
// docs/model-contract.md says. The decision service and the training-data scripts both call this
// module, so what a model is trained on and what it is asked agree byte for byte. It works on
// plain JSON values (the API's shapes), not on proto types.
//
// Templates are evaluated by @huggingface/jinja taken literally: no trim_blocks, no
// lstrip_blocks, the final newline kept (Python: jinja2.Environment(keep_trailing_newline=True)).
// The library's `Template` class turns trim_blocks on, which would join the lines of the choice
// template's option list.
import { Template, parse, tokenize } from "@huggingface/jinja";
import type { JsonValue } from "@bufbuild/protobuf";
import { parseDecisionConfig, type DecisionConfig, type QuestionTypeName } from "./config.js";

/** A question in the API's JSON shape. */
export type DecisionQuestionJson =
  | { type: "noul"; instructions?: JsonValue; criteria?: NoulCriteriaJson | null }
  | {
      type: "choice";
      instructions?: JsonValue;
      /** `{option: description}` as in the API, or `[option, description]` pairs in order. */
      criteria: { [option: string]: JsonValue } | ReadonlyArray<readonly [string, JsonValue | undefined]>;
    }
  | { type: "score"; instructions?: JsonValue; criteria: readonly string[] };

export interface NoulCriteriaJson {
  true?: JsonValue;
  false?: JsonValue;
}

export interface RenderedPrompt {
  /** The rendered state: shared by every question of a request. */
  prefix: string;
  /** The rendered question; the engine appends the masked answer slot after it. */
  suffix: string;
  /** The readout labels of the question's options, in order. */
  labels: string[];
}

export interface RenderedQuestion {
  suffix: string;
  labels: string[];
}

/** The question cannot be asked of this model (e.g. more options than it has labels). */
export class DecisionRenderError extends Error {
  override name = "DecisionRenderError";
}

/** decision.json with its templates parsed once. */
export interface CompiledDecisionConfig {
  config: DecisionConfig;
  renderPrefix(state: JsonValue | undefined): string;
  renderQuestion(question: DecisionQuestionJson): RenderedQuestion;
}

/** A JSON value as the model reads it: strings as they are, null/absent empty, else JSON. */
export function valueToText(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

export function compileDecisionConfig(decisionJson: unknown): CompiledDecisionConfig {
  const config = parseDecisionConfig(decisionJson);
  const prefix = compileTemplate(config.prefixTemplate);
  const question: Record<QuestionTypeName, Template> = {
    noul: compileTemplate(config.questionTemplates.noul),
    choice: compileTemplate(config.questionTemplates.choice),
    score: compileTemplate(config.questionTemplates.score),
  };
  return {
    config,
    renderPrefix: (state) => prefix.render({ state: valueToText(state) }),
    renderQuestion(q) {
      const instructions = valueToText(q.instructions);
      switch (q.type) {
        case "noul": {
          const criteria = q.criteria ?? {};
          return {
            suffix: question.noul.render({
              instructions,
              true_description: valueToText(criteria.true),
              false_description: valueToText(criteria.false),
            }),
            labels: [...config.labels.noul],
          };
        }
        case "choice": {
          const entries = Array.isArray(q.criteria)
            ? (q.criteria as ReadonlyArray<readonly [string, JsonValue | undefined]>)
            : Object.entries(q.criteria);
          const labels = labelsFor(config.labels.choice, entries.length, "options of a choice question");
          const options = entries.map(([name, description], i) => ({
            label: labels[i],
            name,
            description: valueToText(description),
          }));
          return { suffix: question.choice.render({ instructions, options }), labels };
        }
        case "score": {
          const labels = labelsFor(config.labels.score, q.criteria.length, "levels of a score question");
          const levels = q.criteria.map((text, i) => ({ label: labels[i], text }));
          return { suffix: question.score.render({ instructions, levels }), labels };
        }
        default:
          throw new DecisionRenderError(`unknown question type ${JSON.stringify((q as { type: unknown }).type)}`);
      }
    },
  };
}

const compiled = new WeakMap<object, CompiledDecisionConfig>();

/**
 * The prefix (state) and suffix (question) the model reads for one question, and the labels read
 * at its answer slot. `decisionJson` is a model's parsed decision.json; its compiled templates are
 * cached per object.
 */
export function renderDecisionPrompt(decisionJson: object, state: JsonValue | undefined, question: DecisionQuestionJson): RenderedPrompt {
  let c = compiled.get(decisionJson);
  if (c === undefined) {
    c = compileDecisionConfig(decisionJson);
    compiled.set(decisionJson, c);
  }
  return { prefix: c.renderPrefix(state), ...c.renderQuestion(question) };
}

function compileTemplate(source: string): Template {
  const template = new Template("");
  // The lexer drops one final newline (as jinja2 does by default); the extra one keeps the text's own.
  template.parsed = parse(tokenize(`${source}\n`, { lstrip_blocks: false, trim_blocks: false }));
  return template;
}

function labelsFor(available: readonly string[], count: number, what: string): string[] {
  if (count > available.length) {
    throw new DecisionRenderError(`this model supports at most ${available.length} ${what}, got ${count}`);
  }
  return available.slice(0, count);
}
