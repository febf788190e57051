// noul: a yes/no question, answered with P(yes). Criteria optionally describe yes and no.
import type { JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { jsonToProtoValue, protoValueToJson } from "./json-value.js";
import { noulFromLogits } from "./probabilities.js";
import { finite, type QuestionTypeModule, valueToText } from "./question-type.js";
import { isObject, optionalDescription, own } from "./rules.js";

export interface NoulCriteriaJson {
  true?: JsonValue;
  false?: JsonValue;
}

export interface NoulQuestionJson {
  type: "noul";
  instructions?: JsonValue;
  criteria?: NoulCriteriaJson | null;
}

export interface NoulAnswerJson {
  type: "noul";
  noul: number;
}

const NOUL_MSG = {
  criteria: 'criteria of a noul question must be an object {"true": …, "false": …} or null',
  key: 'criteria of a noul question takes only "true" and "false"',
};

const SIDES = [
  ["true", "trueDescription"],
  ["false", "falseDescription"],
] as const;

export const noul: QuestionTypeModule<NoulQuestionJson, NoulAnswerJson> = {
  name: "noul",
  proto: QuestionType.NOUL,

  checkLabels: (labels) => (labels.length === 2 ? undefined : "labels.noul must be [yes, no]"),

  criteriaFromJson(criteria, loc, violations) {
    if (criteria === undefined || criteria === null) return { case: "noul", value: {} };
    if (!isObject(criteria)) {
      violations.push({ loc, msg: NOUL_MSG.criteria, type: "dict_type" });
      return undefined;
    }
    for (const key of Object.keys(criteria)) {
      if (key !== "true" && key !== "false") violations.push({ loc: [...loc, key], msg: NOUL_MSG.key, type: "extra_forbidden" });
    }
    const value: { trueDescription?: Value; falseDescription?: Value } = {};
    for (const [side, field] of SIDES) {
      const d = optionalDescription(own(criteria, side), [...loc, side], violations, true);
      if (d !== undefined) value[field] = jsonToProtoValue(d as JsonValue);
    }
    return { case: "noul", value };
  },

  criteriaFromProto(criteria, loc, violations) {
    if (criteria.case !== undefined && criteria.case !== "noul") {
      violations.push({ loc, msg: NOUL_MSG.criteria, type: "dict_type" });
      return undefined;
    }
    const sides: NoulCriteriaJson = {};
    for (const [side, field] of SIDES) {
      const d = optionalDescription(protoValueToJson(criteria.value?.[field]), [...loc, side], violations, false);
      if (d !== undefined) sides[side] = d;
    }
    return sides;
  },

  render(criteria, labels) {
    const sides = criteria ?? {};
    return {
      variables: { true_description: valueToText(sides.true), false_description: valueToText(sides.false) },
      labels: [...labels],
    };
  },

  answer: (_criteria, logits, temperature) => ({
    type: QuestionType.NOUL,
    result: { case: "noul", value: noulFromLogits(logits, temperature) },
  }),

  answerToJson: (result) => (result.case === "noul" ? { type: "noul", noul: finite(result.value.probability) } : undefined),

  // labels.noul is [yes, no].
  labelIndex: (_criteria, label) =>
    typeof label === "boolean" ? { index: label ? 0 : 1 } : { problem: "the answer to a noul question must be true or false" },
};
