// POST /v1/systemone JSON <-> tessera.decision.v1 messages. Every problem of a body is reported
// (FastAPI-style violations, answered 422 by the route). User JSON is read with own-property
// semantics only, so ids and option names like "__proto__" or "constructor" are plain keys.
import { create, type JsonValue } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import {
  DecideRequestSchema,
  QuestionType,
  ValidationFailureSchema,
  type Answer,
  type DecideRequest,
  type DecideResponse,
  type QuestionSchema,
} from "../../gen/tessera/decision/v1/decision_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { defineKey, jsonToProtoValue } from "../../services/decision/json-value.js";
import {
  MAX_JSON_DEPTH,
  MAX_LEVELS,
  MAX_OPTIONS,
  MAX_QUESTIONS,
  MAX_STATE_CHARS,
  MIN_LEVELS,
  MIN_OPTIONS,
  MSG,
  stateChars,
  type Violation,
} from "../../services/decision/rules.js";

export type { Violation } from "../../services/decision/rules.js";

export type ParsedDecisionRequest = { ok: true; request: DecideRequest } | { ok: false; violations: Violation[] };

type QuestionInit = MessageInitShape<typeof QuestionSchema>;

const TYPES: Record<string, QuestionType> = Object.assign(Object.create(null) as Record<string, QuestionType>, {
  noul: QuestionType.NOUL,
  choice: QuestionType.CHOICE,
  score: QuestionType.SCORE,
});

/** Checks a parsed JSON body against every rule of the decision request; unknown fields are ignored. */
export function parseDecisionRequest(body: unknown, requestId = ""): ParsedDecisionRequest {
  const violations: Violation[] = [];
  if (!isObject(body)) {
    return { ok: false, violations: [{ loc: ["body"], msg: "the body must be a JSON object", type: "dict_type" }] };
  }

  const model = own(body, "model");
  if (model === undefined) violations.push({ loc: ["body", "model"], msg: MSG.required, type: "missing" });
  else if (typeof model !== "string") violations.push({ loc: ["body", "model"], msg: MSG.model, type: "string_type" });
  else if (model === "") violations.push({ loc: ["body", "model"], msg: MSG.model, type: "string_too_short" });

  const state = own(body, "state");
  if (state === undefined) violations.push({ loc: ["body", "state"], msg: MSG.required, type: "missing" });
  else if (!isObjectOrArray(state) && typeof state !== "string") {
    violations.push({ loc: ["body", "state"], msg: MSG.state, type: "value_type" });
  } else if (checkDepth(state, ["body", "state"], violations) && stateChars(state) > MAX_STATE_CHARS) {
    violations.push({ loc: ["body", "state"], msg: MSG.stateTooLong, type: "too_long" });
  }

  const questionList: { id: string; question: QuestionInit }[] = [];
  const questions = own(body, "questions");
  if (questions === undefined) {
    violations.push({ loc: ["body", "questions"], msg: MSG.required, type: "missing" });
  } else if (!isObject(questions)) {
    violations.push({ loc: ["body", "questions"], msg: MSG.questionsObject, type: "dict_type" });
  } else {
    const entries = Object.entries(questions);
    if (entries.length === 0) violations.push({ loc: ["body", "questions"], msg: MSG.questionsEmpty, type: "too_short" });
    // Too many questions are refused without looking at each (that would be the work the limit avoids).
    if (entries.length > MAX_QUESTIONS) violations.push({ loc: ["body", "questions"], msg: MSG.questionsTooMany, type: "too_long" });
    else {
      for (const [id, q] of entries) {
        const question = parseQuestion(id, q, violations);
        if (question !== undefined) questionList.push({ id, question });
      }
    }
  }

  if (violations.length > 0) return { ok: false, violations };
  return {
    ok: true,
    request: create(DecideRequestSchema, {
      requestId,
      model: model as string,
      state: jsonToProtoValue(state as JsonValue),
      questionList,
    }),
  };
}

function parseQuestion(id: string, q: unknown, violations: Violation[]): QuestionInit | undefined {
  const loc = ["body", "questions", id];
  const before = violations.length;
  if (id === "") violations.push({ loc, msg: MSG.questionId, type: "string_too_short" });
  if (!isObject(q)) {
    violations.push({ loc, msg: MSG.questionObject, type: "dict_type" });
    return undefined;
  }

  const instructions = own(q, "instructions");
  if (instructions !== undefined && instructions !== null && typeof instructions !== "string" && !isObjectOrArray(instructions)) {
    violations.push({ loc: [...loc, "instructions"], msg: MSG.instructions, type: "value_type" });
  } else checkDepth(instructions, [...loc, "instructions"], violations);

  const type = own(q, "type");
  const criteria = own(q, "criteria");
  const criteriaLoc = [...loc, "criteria"];
  let question: QuestionInit | undefined;
  const base = {
    instructions: instructions === undefined || instructions === null ? undefined : jsonValue(instructions),
  };
  if (type === undefined) {
    violations.push({ loc: [...loc, "type"], msg: MSG.required, type: "missing" });
  } else if (typeof type !== "string" || TYPES[type] === undefined) {
    violations.push({ loc: [...loc, "type"], msg: MSG.type, type: "enum" });
  } else if (type === "noul") {
    const noul = parseNoulCriteria(criteria, criteriaLoc, violations);
    question = { ...base, type: QuestionType.NOUL, criteria: { case: "noul", value: noul ?? {} } };
  } else if (type === "choice") {
    const options = parseChoiceCriteria(criteria, criteriaLoc, violations);
    question = { ...base, type: QuestionType.CHOICE, criteria: { case: "choice", value: { options } } };
  } else {
    const levels = parseScoreCriteria(criteria, criteriaLoc, violations);
    question = { ...base, type: QuestionType.SCORE, criteria: { case: "score", value: { levels } } };
  }
  return violations.length === before ? question : undefined;
}

function parseNoulCriteria(criteria: unknown, loc: (string | number)[], violations: Violation[]) {
  if (criteria === undefined || criteria === null) return undefined;
  if (!isObject(criteria)) {
    violations.push({ loc, msg: MSG.noulCriteria, type: "dict_type" });
    return undefined;
  }
  for (const key of Object.keys(criteria)) {
    if (key !== "true" && key !== "false") violations.push({ loc: [...loc, key], msg: MSG.noulKey, type: "extra_forbidden" });
  }
  const sides: { trueDescription?: ReturnType<typeof jsonToProtoValue>; falseDescription?: ReturnType<typeof jsonToProtoValue> } = {};
  for (const side of ["true", "false"] as const) {
    const d = own(criteria, side);
    if (d === undefined || d === null) continue;
    if (!isDescription(d)) violations.push({ loc: [...loc, side], msg: MSG.description, type: "value_type" });
    else if (checkDepth(d, [...loc, side], violations)) sides[side === "true" ? "trueDescription" : "falseDescription"] = jsonValue(d);
  }
  return sides;
}

function parseChoiceCriteria(criteria: unknown, loc: (string | number)[], violations: Violation[]) {
  if (criteria === undefined || criteria === null) {
    violations.push({ loc, msg: MSG.required, type: "missing" });
    return [];
  }
  if (!isObject(criteria)) {
    violations.push({ loc, msg: MSG.choiceCriteria, type: "dict_type" });
    return [];
  }
  const entries = Object.entries(criteria);
  if (entries.length < MIN_OPTIONS) violations.push({ loc, msg: MSG.choiceCount, type: "too_short" });
  if (entries.length > MAX_OPTIONS) violations.push({ loc, msg: MSG.choiceCount, type: "too_long" });
  return entries.flatMap(([name, description]) => {
    if (description !== null && !isDescription(description)) {
      violations.push({ loc: [...loc, name], msg: MSG.description, type: "value_type" });
      return [];
    }
    if (!checkDepth(description, [...loc, name], violations)) return [];
    return [{ name, description: description === null ? undefined : jsonValue(description) }];
  });
}

function parseScoreCriteria(criteria: unknown, loc: (string | number)[], violations: Violation[]): string[] {
  if (criteria === undefined || criteria === null) {
    violations.push({ loc, msg: MSG.required, type: "missing" });
    return [];
  }
  if (!Array.isArray(criteria)) {
    violations.push({ loc, msg: MSG.scoreCriteria, type: "list_type" });
    return [];
  }
  if (criteria.length < MIN_LEVELS) violations.push({ loc, msg: MSG.scoreCount, type: "too_short" });
  if (criteria.length > MAX_LEVELS) violations.push({ loc, msg: MSG.scoreCount, type: "too_long" });
  criteria.forEach((level, i) => {
    if (typeof level !== "string") violations.push({ loc: [...loc, i], msg: MSG.level, type: "string_type" });
  });
  return criteria.filter((level): level is string => typeof level === "string");
}

/** The decision response document of the API, answers keyed exactly by the ids sent. */
export interface DecisionResponseJson {
  model: string;
  answers: { [id: string]: AnswerJson };
  usage: { input_tokens: number; output_tokens: number };
}

export type AnswerJson =
  | { type: "noul"; noul: number }
  | { type: "choice"; choice: string; probabilities: { [option: string]: number }; confidence: number }
  | {
      type: "score";
      score: number;
      legend: { [level: string]: string };
      probabilities: { [level: string]: number };
      confidence: number;
    };

export function decisionResponseToJson(res: DecideResponse): DecisionResponseJson {
  const answers: { [id: string]: AnswerJson } = {};
  const listed = res.answerList.length > 0 ? res.answerList.map((a) => [a.id, a.answer] as const) : Object.entries(res.answers);
  for (const [id, answer] of listed) {
    if (answer !== undefined) defineKey(answers, id, answerToJson(answer));
  }
  return {
    model: res.model,
    answers,
    usage: { input_tokens: res.usage?.inputTokens ?? 0, output_tokens: res.usage?.outputTokens ?? 0 },
  };
}

function answerToJson(answer: Answer): AnswerJson {
  const result = answer.result;
  switch (result.case) {
    case "noul":
      return { type: "noul", noul: finite(result.value.probability) };
    case "choice": {
      const probabilities: { [option: string]: number } = {};
      for (const p of result.value.probabilities) defineKey(probabilities, p.option, finite(p.probability));
      return { type: "choice", choice: result.value.choice, probabilities, confidence: finite(result.value.confidence) };
    }
    case "score": {
      const legend: { [level: string]: string } = {};
      const probabilities: { [level: string]: number } = {};
      result.value.legend.forEach((text, i) => {
        defineKey(legend, String(i), text);
      });
      result.value.probabilities.forEach((p, i) => {
        defineKey(probabilities, String(i), finite(p));
      });
      return {
        type: "score",
        score: finite(result.value.score),
        legend,
        probabilities,
        confidence: finite(result.value.confidence),
      };
    }
    default:
      throw new Error(`decision answer without a result (type ${answer.type})`);
  }
}

/** The violations of an InvalidArgument from the decision service (answered 422), if it has any. */
export function decisionViolationsOf(err: unknown): Violation[] | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const failures = err.findDetails(ValidationFailureSchema);
  if (failures.length === 0) return undefined;
  return failures.flatMap((f) => f.violations.map((v) => ({ loc: [...v.loc], msg: v.msg, type: v.type })));
}

/**
 * Nesting deeper than MAX_JSON_DEPTH is refused before anything recurses over it (the proto
 * conversion and the renderer do). Measured without recursion, so any depth is safe to check.
 */
function checkDepth(value: unknown, loc: (string | number)[], violations: Violation[]): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > MAX_JSON_DEPTH) {
      violations.push({ loc, msg: MSG.depth, type: "too_deep" });
      return false;
    }
    for (const child of Object.values(v)) if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
  }
  return true;
}

function own(obj: { [key: string]: unknown }, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function isObject(v: unknown): v is { [key: string]: unknown } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isObjectOrArray(v: unknown): boolean {
  return typeof v === "object" && v !== null;
}

function isDescription(v: unknown): boolean {
  return typeof v === "string" || isObjectOrArray(v);
}

function jsonValue(v: unknown) {
  return jsonToProtoValue(v as JsonValue);
}

// The service never produces NaN or Infinity; this keeps a bug from ever reaching a client as
// invalid JSON (JSON.stringify would write null).
function finite(x: number): number {
  return Number.isFinite(x) ? x : 0;
}
