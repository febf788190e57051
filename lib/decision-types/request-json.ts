// A /v1/systemone request body (JSON) as a tessera.decision.v1 DecideRequest: the gateway, the
// calibration command and the benchmarks read bodies through this one parser. Every problem of a
// body is reported (FastAPI-style violations, answered 422 by the route). User JSON is read with
// own-property semantics only, so ids and option names like "__proto__" or "constructor" are plain
// keys. What each question type accepts is its module's (registry.ts).
import { create, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import {
  DecideRequestSchema,
  ValidationFailureSchema,
  type DecideRequest,
  type QuestionSchema,
} from "../../gen/tessera/decision/v1/decision_pb.js";
import { jsonToProtoValue } from "./json-value.js";
import { questionTypeNamed, unknownTypeViolation } from "./registry.js";
import { checkQuestionCount, checkQuestionId, checkState, isObject, MSG, optionalDescription, own, type Violation } from "./rules.js";

export type ParsedDecisionRequest = { ok: true; request: DecideRequest } | { ok: false; violations: Violation[] };

type QuestionInit = MessageInitShape<typeof QuestionSchema>;

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
  checkState(state, violations, true);

  const questionList: { id: string; question: QuestionInit }[] = [];
  const questions = own(body, "questions");
  if (questions === undefined) {
    violations.push({ loc: ["body", "questions"], msg: MSG.required, type: "missing" });
  } else if (!isObject(questions)) {
    violations.push({ loc: ["body", "questions"], msg: MSG.questionsObject, type: "dict_type" });
  } else {
    const entries = Object.entries(questions);
    if (checkQuestionCount(entries.length, violations)) {
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
  checkQuestionId(id, violations);
  if (!isObject(q)) {
    violations.push({ loc, msg: MSG.questionObject, type: "dict_type" });
    return undefined;
  }

  const instructions = optionalDescription(own(q, "instructions"), [...loc, "instructions"], violations, true, MSG.instructions);
  const typeName = own(q, "type");
  const type = questionTypeNamed(typeName);
  let criteria: QuestionInit["criteria"];
  if (typeName === undefined) violations.push({ loc: [...loc, "type"], msg: MSG.required, type: "missing" });
  else if (type === undefined) violations.push(unknownTypeViolation([...loc, "type"]));
  else criteria = type.criteriaFromJson(own(q, "criteria"), [...loc, "criteria"], violations);

  if (type === undefined || violations.length !== before) return undefined;
  return { type: type.proto, instructions: instructions === undefined ? undefined : jsonToProtoValue(instructions as JsonValue), criteria };
}

/** The violations of an InvalidArgument from the decision service (answered 422), if it has any. */
export function decisionViolationsOf(err: unknown): Violation[] | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const failures = err.findDetails(ValidationFailureSchema);
  if (failures.length === 0) return undefined;
  return failures.flatMap((f) => f.violations.map((v) => ({ loc: [...v.loc], msg: v.msg, type: v.type })));
}
