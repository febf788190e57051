// Checks a proto DecideRequest (direct gRPC callers skip the gateway's JSON checks) and turns it
// into the plain questions that render.ts reads. Every problem is reported, not only the first.
// The rules are the gateway's (lib/decision-types): shared ones in rules.ts, each type's in its module.
import type { JsonValue } from "@bufbuild/protobuf";
import type { DecideRequest, Question } from "../../gen/tessera/decision/v1/decision_pb.js";
import { protoValueToJson } from "../../lib/decision-types/json-value.js";
import { questionTypeOf, unknownTypeViolation, type QuestionTypeEntry } from "../../lib/decision-types/registry.js";
import {
  checkQuestionCount,
  checkQuestionId,
  checkState,
  MSG,
  optionalDescription,
  type Loc,
  type Violation,
} from "../../lib/decision-types/rules.js";

export interface CheckedQuestion {
  id: string;
  type: QuestionTypeEntry;
  question: { type: string; instructions?: JsonValue; criteria?: unknown };
}

export type CheckedRequest = { ok: true; state: JsonValue; questions: CheckedQuestion[] } | { ok: false; violations: Violation[] };

export function checkDecideRequest(req: DecideRequest): CheckedRequest {
  const violations: Violation[] = [];
  if (req.model === "") violations.push({ loc: ["body", "model"], msg: MSG.required, type: "missing" });

  const state = protoValueToJson(req.state);
  checkState(state, violations, false);

  const entries: [string, Question | undefined][] = [
    ...req.questionList.map((q): [string, Question | undefined] => [q.id, q.question]),
    ...Object.entries(req.questions),
  ];
  if (!checkQuestionCount(entries.length, violations)) return { ok: false, violations };
  const seen = new Set<string>();
  const questions: CheckedQuestion[] = [];
  for (const [id, question] of entries) {
    const loc = ["body", "questions", id];
    checkQuestionId(id, violations);
    if (seen.has(id)) violations.push({ loc, msg: MSG.questionDuplicate, type: "duplicate" });
    seen.add(id);
    if (question === undefined) {
      violations.push({ loc, msg: MSG.required, type: "missing" });
      continue;
    }
    const checked = checkQuestion(id, question, loc, violations);
    if (checked !== undefined) questions.push(checked);
  }

  if (violations.length > 0) return { ok: false, violations };
  return { ok: true, state: state as JsonValue, questions };
}

function checkQuestion(id: string, q: Question, loc: Loc, violations: Violation[]): CheckedQuestion | undefined {
  const before = violations.length;
  const instructions = optionalDescription(protoValueToJson(q.instructions), [...loc, "instructions"], violations, false, MSG.instructions);
  const type = questionTypeOf(q.type);
  if (type === undefined) {
    violations.push(unknownTypeViolation([...loc, "type"]));
    return undefined;
  }
  const criteria = type.criteriaFromProto(q.criteria, [...loc, "criteria"], violations);
  if (violations.length !== before) return undefined;
  return { id, type, question: { type: type.name, instructions, criteria } };
}
