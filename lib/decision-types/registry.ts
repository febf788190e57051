// The question types of /v1/systemone, in one table. A new type is a module like noul.ts (its
// rules, wire mappings, rendering variables, labels and answer), one entry here, and its messages
// in proto/tessera/decision/v1/decision.proto.
import type { Answer, QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { choice } from "./choice.js";
import { noul } from "./noul.js";
import type { QuestionTypeModule } from "./question-type.js";
import type { Loc, Violation } from "./rules.js";
import { score } from "./score.js";

export const QUESTION_TYPES = [noul, choice, score] as const;

type Registered = (typeof QUESTION_TYPES)[number];
export type QuestionTypeName = Registered["name"];
/** A question in the API's JSON shape, of any registered type. */
export type DecisionQuestionJson = Registered extends infer M ? (M extends QuestionTypeModule<infer Q, unknown> ? Q : never) : never;
/** An answer in the REST JSON, of any registered type. */
export type AnswerJson = Registered extends infer M ? (M extends QuestionTypeModule<infer _Q, infer J> ? J : never) : never;

/** A registered type, seen without its own criteria type (what lookups by name or enum give). */
export type QuestionTypeEntry = QuestionTypeModule<{ type: QuestionTypeName; criteria?: unknown }, AnswerJson>;

const ENTRIES: readonly QuestionTypeEntry[] = QUESTION_TYPES;
export const QUESTION_TYPE_NAMES: readonly QuestionTypeName[] = ENTRIES.map((t) => t.name);
const byName = new Map<string, QuestionTypeEntry>(ENTRIES.map((t) => [t.name, t]));
const byProto = new Map<QuestionType, QuestionTypeEntry>(ENTRIES.map((t) => [t.proto, t]));

/** The type a REST question names; undefined for anything else (also "__proto__" and non-strings). */
export function questionTypeNamed(name: unknown): QuestionTypeEntry | undefined {
  return typeof name === "string" ? byName.get(name) : undefined;
}

export function questionTypeOf(proto: QuestionType): QuestionTypeEntry | undefined {
  return byProto.get(proto);
}

export function unknownTypeViolation(loc: Loc): Violation {
  return { loc, msg: `type must be one of ${QUESTION_TYPE_NAMES.join(", ")}`, type: "enum" };
}

/** proto → REST: an answer as the API's JSON. */
export function answerToJson(answer: Answer): AnswerJson {
  for (const type of ENTRIES) {
    const json = type.answerToJson(answer.result);
    if (json !== undefined) return json;
  }
  throw new Error(`decision answer without a result (type ${answer.type})`);
}
