// What a question type is: everything about one type of /v1/systemone question, from the REST
// JSON to the answer, in one module (noul.ts, choice.ts, score.ts), registered in registry.ts.
// The gateway uses the wire mappings, the decision service the proto check, rendering and answer.
import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import type { Answer, AnswerSchema, Question, QuestionSchema, QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import type { Loc, Violation } from "./rules.js";

/** A question in the API's JSON shape, as the renderer reads it. */
export interface PlainQuestion {
  type: string;
  instructions?: JsonValue;
  criteria?: unknown;
}

/** The criteria oneof of a proto Question, as built from REST JSON. */
export type CriteriaInit = MessageInitShape<typeof QuestionSchema>["criteria"];
export type AnswerInit = MessageInitShape<typeof AnswerSchema>;

/** The template variables of a question besides `instructions`, and the labels read at its answer slot. */
export interface QuestionRendering {
  variables: Record<string, unknown>;
  labels: string[];
}

/**
 * One question type. `Q` is its plain question (the criteria the renderer reads), `J` its
 * answer in the REST JSON. Methods (not function properties) so that the registry can hold
 * every type as a QuestionTypeModule of plain questions.
 */
export interface QuestionTypeModule<Q extends PlainQuestion = PlainQuestion, J = unknown> {
  /** The REST `type`, the key of this type's template, labels and temperature in decision.json. */
  readonly name: Q["type"];
  readonly proto: QuestionType;
  /** decision.json: what is wrong with this type's readout labels, if anything. */
  checkLabels(labels: readonly string[]): string | undefined;
  /** REST → proto: a JSON question's `criteria` as the Question.criteria oneof; undefined and violations when invalid. */
  criteriaFromJson(criteria: unknown, loc: Loc, violations: Violation[]): CriteriaInit | undefined;
  /** proto → plain: the Question.criteria oneof as the renderer reads it; undefined and violations when invalid. */
  criteriaFromProto(criteria: Question["criteria"], loc: Loc, violations: Violation[]): Q["criteria"] | undefined;
  /** The template variables and labels, given the model's labels for this type (DecisionRenderError when too few). */
  render(criteria: Q["criteria"], labels: readonly string[]): QuestionRendering;
  /** The answer from the logits of the labels, calibrated by the type's temperature. */
  answer(criteria: Q["criteria"], logits: readonly number[], temperature: number): AnswerInit;
  /** proto → REST: the answer's JSON, or undefined when `result` is another type's. */
  answerToJson(result: Answer["result"]): J | undefined;
  /**
   * Calibration (`tessera calibrate`): which of the question's labels a labelled answer names
   * (noul true/false, a choice's option name, a score's level), or what is wrong with it.
   */
  labelIndex(criteria: Q["criteria"], label: unknown): LabelIndex;
}

/** The position of a labelled answer among a question's labels, or why it names none. */
export type LabelIndex = { index: number } | { problem: string };

/** The question cannot be asked of this model (e.g. more options than it has labels). */
export class DecisionRenderError extends Error {
  override name = "DecisionRenderError";
}

/** A JSON value as the model reads it: strings as they are, null/absent empty, else JSON. */
export function valueToText(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** The first `count` of a model's labels for a type. */
export function labelsFor(available: readonly string[], count: number, what: string): string[] {
  if (count > available.length) {
    throw new DecisionRenderError(`this model supports at most ${available.length} ${what}, got ${count}`);
  }
  return available.slice(0, count);
}

// The service never produces NaN or Infinity; this keeps a bug from ever reaching a client as
// invalid JSON (JSON.stringify would write null).
export function finite(x: number): number {
  return Number.isFinite(x) ? x : 0;
}

/** `"a", "b", "c"` for messages, the first `max` only. */
export function quotedList(values: readonly string[], max = 8): string {
  const shown = values.slice(0, max).map((v) => JSON.stringify(v));
  return values.length > max ? `${shown.join(", ")}, … (${values.length} in all)` : shown.join(", ");
}
