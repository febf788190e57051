// The decision service's answer (tessera.decision.v1) as the POST /v1/systemone response JSON.
// Bodies are read by the decision contract's parser (lib/decision-types/request-json.ts).
import type { DecideResponse } from "../../gen/tessera/decision/v1/decision_pb.js";
import { defineKey } from "../../lib/decision-types/json-value.js";
import { answerToJson, type AnswerJson } from "../../lib/decision-types/registry.js";

export { decisionViolationsOf, parseDecisionRequest, type ParsedDecisionRequest } from "../../lib/decision-types/request-json.js";

/** The decision response document of the API, answers keyed exactly by the ids sent. */
export interface DecisionResponseJson {
  model: string;
  answers: { [id: string]: AnswerJson };
  usage: { input_tokens: number; output_tokens: number };
}

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
