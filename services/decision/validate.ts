// Checks a proto DecideRequest (direct gRPC callers skip the gateway's JSON checks) and turns it
// into the plain questions that render.ts reads. Every problem is reported, not only the first.
import type { JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { QuestionType, type DecideRequest, type Question } from "../../gen/tessera/decision/v1/decision_pb.js";
import { protoValueToJson } from "./json-value.js";
import type { DecisionQuestionJson } from "./render.js";
import {
  MAX_LEVELS,
  MAX_OPTIONS,
  MAX_QUESTIONS,
  MAX_STATE_CHARS,
  MIN_LEVELS,
  MIN_OPTIONS,
  MSG,
  stateChars,
  type Violation,
} from "./rules.js";

export interface CheckedQuestion {
  id: string;
  question: DecisionQuestionJson;
}

export type CheckedRequest = { ok: true; state: JsonValue; questions: CheckedQuestion[] } | { ok: false; violations: Violation[] };

export function checkDecideRequest(req: DecideRequest): CheckedRequest {
  const violations: Violation[] = [];
  if (req.model === "") violations.push({ loc: ["body", "model"], msg: MSG.required, type: "missing" });

  const state = protoValueToJson(req.state);
  if (state === undefined) {
    violations.push({ loc: ["body", "state"], msg: MSG.required, type: "missing" });
  } else if (state === null || (typeof state !== "object" && typeof state !== "string")) {
    violations.push({ loc: ["body", "state"], msg: MSG.state, type: "value_type" });
  } else if (stateChars(state) > MAX_STATE_CHARS) {
    violations.push({ loc: ["body", "state"], msg: MSG.stateTooLong, type: "too_long" });
  }

  const entries: [string, Question | undefined][] = [
    ...req.questionList.map((q): [string, Question | undefined] => [q.id, q.question]),
    ...Object.entries(req.questions),
  ];
  if (entries.length === 0) {
    violations.push({ loc: ["body", "questions"], msg: MSG.questionsEmpty, type: "too_short" });
  }
  if (entries.length > MAX_QUESTIONS) {
    return { ok: false, violations: [...violations, { loc: ["body", "questions"], msg: MSG.questionsTooMany, type: "too_long" }] };
  }
  const seen = new Set<string>();
  const questions: CheckedQuestion[] = [];
  for (const [id, question] of entries) {
    const loc = ["body", "questions", id];
    if (id === "") violations.push({ loc, msg: MSG.questionId, type: "string_too_short" });
    if (seen.has(id)) violations.push({ loc, msg: MSG.questionDuplicate, type: "duplicate" });
    seen.add(id);
    if (question === undefined) {
      violations.push({ loc, msg: MSG.required, type: "missing" });
      continue;
    }
    const checked = checkQuestion(question, loc, violations);
    if (checked !== undefined) questions.push({ id, question: checked });
  }

  if (violations.length > 0) return { ok: false, violations };
  return { ok: true, state: state as JsonValue, questions };
}

function checkQuestion(q: Question, loc: string[], violations: Violation[]): DecisionQuestionJson | undefined {
  const before = violations.length;
  const instructions = optionalDescription(q.instructions);
  if (instructions === INVALID) {
    violations.push({ loc: [...loc, "instructions"], msg: MSG.instructions, type: "value_type" });
  }
  const criteriaLoc = [...loc, "criteria"];
  const criteria = q.criteria;
  let question: DecisionQuestionJson | undefined;

  switch (q.type) {
    case QuestionType.NOUL: {
      if (criteria.case !== undefined && criteria.case !== "noul") {
        violations.push({ loc: criteriaLoc, msg: MSG.noulCriteria, type: "dict_type" });
        break;
      }
      const sides: { true?: JsonValue; false?: JsonValue } = {};
      for (const [side, value] of [
        ["true", criteria.value?.trueDescription],
        ["false", criteria.value?.falseDescription],
      ] as const) {
        const d = optionalDescription(value);
        if (d === INVALID) violations.push({ loc: [...criteriaLoc, side], msg: MSG.description, type: "value_type" });
        else if (d !== undefined) sides[side] = d;
      }
      question = { type: "noul", instructions: instructions === INVALID ? undefined : instructions, criteria: sides };
      break;
    }
    case QuestionType.CHOICE: {
      if (criteria.case !== "choice") {
        violations.push(
          criteria.case === undefined
            ? { loc: criteriaLoc, msg: MSG.required, type: "missing" }
            : { loc: criteriaLoc, msg: MSG.choiceCriteria, type: "dict_type" },
        );
        break;
      }
      const options = criteria.value.options;
      if (options.length < MIN_OPTIONS) violations.push({ loc: criteriaLoc, msg: MSG.choiceCount, type: "too_short" });
      if (options.length > MAX_OPTIONS) violations.push({ loc: criteriaLoc, msg: MSG.choiceCount, type: "too_long" });
      const names = new Set<string>();
      const pairs: [string, JsonValue | undefined][] = [];
      for (const option of options) {
        const optionLoc = [...criteriaLoc, option.name];
        if (names.has(option.name)) violations.push({ loc: optionLoc, msg: MSG.optionDuplicate, type: "duplicate" });
        names.add(option.name);
        const d = optionalDescription(option.description);
        if (d === INVALID) violations.push({ loc: optionLoc, msg: MSG.description, type: "value_type" });
        else pairs.push([option.name, d]);
      }
      question = { type: "choice", instructions: instructions === INVALID ? undefined : instructions, criteria: pairs };
      break;
    }
    case QuestionType.SCORE: {
      if (criteria.case !== "score") {
        violations.push(
          criteria.case === undefined
            ? { loc: criteriaLoc, msg: MSG.required, type: "missing" }
            : { loc: criteriaLoc, msg: MSG.scoreCriteria, type: "list_type" },
        );
        break;
      }
      const levels = criteria.value.levels;
      if (levels.length < MIN_LEVELS) violations.push({ loc: criteriaLoc, msg: MSG.scoreCount, type: "too_short" });
      if (levels.length > MAX_LEVELS) violations.push({ loc: criteriaLoc, msg: MSG.scoreCount, type: "too_long" });
      question = { type: "score", instructions: instructions === INVALID ? undefined : instructions, criteria: levels };
      break;
    }
    default:
      violations.push({ loc: [...loc, "type"], msg: MSG.type, type: "enum" });
  }
  return violations.length === before ? question : undefined;
}

const INVALID = Symbol("invalid");

/** A description or instructions: string, object, array, or null/absent (undefined). */
function optionalDescription(value: Value | undefined): JsonValue | undefined | typeof INVALID {
  const json = protoValueToJson(value);
  if (json === undefined || json === null) return undefined;
  if (typeof json === "string" || typeof json === "object") return json;
  return INVALID;
}
