// Renders a decision prompt from the model's decision.json templates, exactly as
// docs/model-contract.md says. The decision service, the training-data scripts
// (training/pipeline/prepare-data.mjs, run under tsx) and training/pipeline/check-bundle.mjs all call this module,
// so what a model is trained on and what it is asked agree byte for byte; each type's variables
// and labels are its module's (registry.ts). It works on plain JSON values (the API's shapes),
// not on proto types.
//
// Templates are evaluated by @huggingface/jinja taken literally: no trim_blocks, no
// lstrip_blocks, the final newline kept (Python: jinja2.Environment(keep_trailing_newline=True)).
// The library's `Template` class turns trim_blocks on, which would join the lines of the choice
// template's option list.
import { parse, tokenize } from "@huggingface/jinja";
import { BoundedTemplate } from "../bounded-template.js";
import { markUserText } from "../user-text-span.js";
import type { JsonValue } from "@bufbuild/protobuf";
import { DecisionRenderError, type PlainQuestion, valueToText } from "./question-type.js";
import { QUESTION_TYPES, questionTypeNamed, type QuestionTypeName } from "./registry.js";
import { parseDecisionConfig, type DecisionConfig } from "./model-config.js";

/** The model has no template for this question type (decision.json), so it answers no question of it. */
export class DecisionTypeUnsupported extends Error {
  override name = "DecisionTypeUnsupported";
  constructor(readonly type: QuestionTypeName) {
    super(`has no template for question type "${type}" (decision.json question_templates.${type})`);
  }
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

/** decision.json with its templates parsed once. */
export interface CompiledDecisionConfig {
  config: DecisionConfig;
  renderPrefix(state: JsonValue | undefined): string;
  /** A question of any registered type (DecisionQuestionJson in registry.ts); DecisionTypeUnsupported for a type without a template. */
  renderQuestion(question: PlainQuestion): RenderedQuestion;
}

export interface CompileOptions {
  /**
   * Mark the state, the instructions and the criteria as user text (lib/user-text-span.ts), so the engine never
   * reads a special token typed in them as a control token. The decision service does; training
   * data, which must be the prompt's bytes, does not.
   */
  markUserText?: boolean;
}

export function compileDecisionConfig(decisionJson: unknown, options: CompileOptions = {}): CompiledDecisionConfig {
  const config = parseDecisionConfig(decisionJson);
  const user = options.markUserText === true ? markUserText : (text: string) => text;
  const prefix = compileTemplate(config.prefixTemplate);
  const templates = new Map<QuestionTypeName, BoundedTemplate>();
  for (const t of QUESTION_TYPES) {
    const source = config.questionTemplates[t.name];
    if (source !== undefined) templates.set(t.name, compileTemplate(source));
  }
  return {
    config,
    renderPrefix: (state) => prefix.render({ state: user(valueToText(state)) }),
    renderQuestion(q) {
      const type = questionTypeNamed(q.type);
      if (type === undefined) throw new DecisionRenderError(`unknown question type ${JSON.stringify(q.type)}`);
      const template = templates.get(type.name);
      const typeLabels = config.labels[type.name];
      if (template === undefined || typeLabels === undefined) throw new DecisionTypeUnsupported(type.name);
      const { variables, labels } = type.render(q.criteria, typeLabels);
      const criteria = options.markUserText === true ? markCriteria(variables) : variables;
      return { suffix: template.render({ instructions: user(valueToText(q.instructions)), ...criteria }), labels };
    },
  };
}

const compiled = new WeakMap<object, CompiledDecisionConfig>();

/**
 * The prefix (state) and suffix (question) the model reads for one question, and the labels read
 * at its answer slot. `decisionJson` is a model's parsed decision.json; its compiled templates are
 * cached per object.
 */
export function renderDecisionPrompt(decisionJson: object, state: JsonValue | undefined, question: PlainQuestion): RenderedPrompt {
  let c = compiled.get(decisionJson);
  if (c === undefined) {
    c = compileDecisionConfig(decisionJson);
    compiled.set(decisionJson, c);
  }
  return { prefix: c.renderPrefix(state), ...c.renderQuestion(question) };
}

/**
 * A question type's template variables with the user's criteria (option names, descriptions,
 * level texts) marked as user text: every string but a `label`, which is the model's own label
 * token (decision.json `labels`) and must stay one.
 */
function markCriteria<T>(value: T, key?: string): T {
  if (typeof value === "string") return (key === "label" ? value : markUserText(value)) as T;
  if (Array.isArray(value)) return value.map((v) => markCriteria(v)) as T;
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, markCriteria(v, k)])) as T;
  return value;
}

function compileTemplate(source: string): BoundedTemplate {
  // The lexer drops one final newline (as jinja2 does by default); the extra one keeps the text's own.
  return new BoundedTemplate({ parsed: parse(tokenize(`${source}\n`, { lstrip_blocks: false, trim_blocks: false })) });
}
