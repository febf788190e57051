// A model's decision.json (docs/model-contract.md): read and checked once, so rendering and the
// readout can rely on its shape.

export type QuestionTypeName = "noul" | "choice" | "score";
export const QUESTION_TYPE_NAMES: readonly QuestionTypeName[] = ["noul", "choice", "score"];

export interface DecisionConfig {
  version: number;
  prefixTemplate: string;
  questionTemplates: Record<QuestionTypeName, string>;
  /** Readout labels: noul [yes, no]; choice and score one per option/level, in order. */
  labels: Record<QuestionTypeName, string[]>;
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
    questionTemplates: { noul: "", choice: "", score: "" },
    labels: { noul: [], choice: [], score: [] },
    temperatures: { noul: 1, choice: 1, score: 1 },
  };
  for (const type of QUESTION_TYPE_NAMES) {
    config.questionTemplates[type] = stringAt(templates[type], `question_templates.${type}`);
    config.labels[type] = labelsAt(labels[type], `labels.${type}`);
    const t = temperatures[type];
    if (t !== undefined) {
      if (typeof t !== "number" || !Number.isFinite(t) || t <= 0) {
        throw new DecisionConfigError(`decision.json: temperatures.${type} must be a positive number`);
      }
      config.temperatures[type] = t;
    }
  }
  if (config.labels.noul.length !== 2) {
    throw new DecisionConfigError("decision.json: labels.noul must be [yes, no]");
  }
  if (config.labels.score.length < 2) {
    throw new DecisionConfigError("decision.json: labels.score needs at least 2 labels");
  }
  return config;
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
