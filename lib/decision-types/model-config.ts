// A model's decision.json (docs/model-contract.md): read and checked once, so rendering and the
// readout can rely on its shape. A question type the model answers has a template, labels
// (checked by the type's module) and a temperature; a type without a template is one the model
// does not answer (its questions are refused, the other types answered).
import { QUESTION_TYPE_NAMES, QUESTION_TYPES, type QuestionTypeName } from "./registry.js";

export interface DecisionConfig {
  version: number;
  prefixTemplate: string;
  /** The question types this model answers: those with a template. */
  questionTemplates: Partial<Record<QuestionTypeName, string>>;
  /** Readout labels of each answered type: noul [yes, no]; choice and score one per option/level, in order. */
  labels: Partial<Record<QuestionTypeName, string[]>>;
  /** Calibration temperature per type; 1 where decision.json gives none. */
  temperatures: Record<QuestionTypeName, number>;
}

/** decision.json is missing something or malformed; the model cannot answer decisions. */
export class DecisionConfigError extends Error {
  override name = "DecisionConfigError";
}

export function parseDecisionConfig(json: unknown): DecisionConfig {
  const root = objectAt(json, "decision.json");
  const version = root["version"];
  if (version !== 1) throw new DecisionConfigError(`decision.json: unsupported version ${JSON.stringify(version)}`);
  const prefixTemplate = stringAt(root["prefix_template"], "prefix_template");
  const templates = objectAt(root["question_templates"], "question_templates");
  const labels = objectAt(root["labels"], "labels");
  const temperatures = root["temperatures"] === undefined ? {} : objectAt(root["temperatures"], "temperatures");
  const config: DecisionConfig = {
    version,
    prefixTemplate,
    questionTemplates: {},
    labels: {},
    temperatures: perType(() => 1),
  };
  for (const type of QUESTION_TYPE_NAMES) {
    if (Object.hasOwn(templates, type)) {
      config.questionTemplates[type] = stringAt(templates[type], `question_templates.${type}`);
      config.labels[type] = labelsAt(labels[type], `labels.${type}`);
    }
    const t = temperatures[type];
    if (t !== undefined) {
      if (typeof t !== "number" || !Number.isFinite(t) || t <= 0) {
        throw new DecisionConfigError(`decision.json: temperatures.${type} must be a positive number`);
      }
      config.temperatures[type] = t;
    }
  }
  if (Object.keys(config.questionTemplates).length === 0) {
    throw new DecisionConfigError(`decision.json: question_templates has a template for none of ${QUESTION_TYPE_NAMES.join(", ")}`);
  }
  for (const type of QUESTION_TYPES) {
    const typeLabels = config.labels[type.name];
    const problem = typeLabels === undefined ? undefined : type.checkLabels(typeLabels);
    if (problem !== undefined) throw new DecisionConfigError(`decision.json: ${problem}`);
  }
  return config;
}

function perType<T>(initial: () => T): Record<QuestionTypeName, T> {
  return Object.fromEntries(QUESTION_TYPE_NAMES.map((name) => [name, initial()])) as Record<QuestionTypeName, T>;
}

function objectAt(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new DecisionConfigError(`decision.json: ${where} must be an object`);
  }
  return v as Record<string, unknown>;
}

function stringAt(v: unknown, where: string): string {
  if (typeof v !== "string") throw new DecisionConfigError(`decision.json: ${where} must be a string`);
  return v;
}

function labelsAt(v: unknown, where: string): string[] {
  if (!Array.isArray(v) || v.length === 0 || !v.every((l) => typeof l === "string" && l !== "")) {
    throw new DecisionConfigError(`decision.json: ${where} must be a non-empty array of non-empty strings`);
  }
  if (new Set(v).size !== v.length) throw new DecisionConfigError(`decision.json: ${where} has duplicates`);
  return [...(v as string[])];
}
