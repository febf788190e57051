// choice: pick one of 1 to 255 named options, answered with the most likely option, every
// option's probability and a confidence. The API document says 1 to 128; the SDKs and open
// decision models take up to 255, and a model with fewer labels than options refuses the question.
import type { JsonValue } from "@bufbuild/protobuf";
import { QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { defineKey, jsonToProtoValue, protoValueToJson } from "./json-value.js";
import { choiceFromLogits } from "./probabilities.js";
import { finite, labelsFor, type QuestionTypeModule, quotedList, valueToText } from "./question-type.js";
import { checkCount, isObject, MSG, optionalDescription } from "./rules.js";

export const MIN_OPTIONS = 1;
export const MAX_OPTIONS = 255;

/** `{option: description}` as in the API, or `[option, description]` pairs in order. */
export type ChoiceCriteriaJson = { [option: string]: JsonValue } | ReadonlyArray<readonly [string, JsonValue | undefined]>;

export interface ChoiceQuestionJson {
  type: "choice";
  instructions?: JsonValue;
  criteria: ChoiceCriteriaJson;
}

export interface ChoiceAnswerJson {
  type: "choice";
  choice: string;
  probabilities: { [option: string]: number };
  confidence: number;
}

const CHOICE_MSG = {
  criteria: "criteria of a choice question must be an object {option: description}",
  count: `a choice question needs ${MIN_OPTIONS} to ${MAX_OPTIONS} options`,
  duplicate: "option given more than once",
};

function optionsOf(criteria: ChoiceCriteriaJson): ReadonlyArray<readonly [string, JsonValue | undefined]> {
  return Array.isArray(criteria) ? (criteria as ReadonlyArray<readonly [string, JsonValue | undefined]>) : Object.entries(criteria);
}

export const choice: QuestionTypeModule<ChoiceQuestionJson, ChoiceAnswerJson> = {
  name: "choice",
  proto: QuestionType.CHOICE,

  checkLabels: () => undefined,

  criteriaFromJson(criteria, loc, violations) {
    if (criteria === undefined || criteria === null) {
      violations.push({ loc, msg: MSG.required, type: "missing" });
      return undefined;
    }
    if (!isObject(criteria)) {
      violations.push({ loc, msg: CHOICE_MSG.criteria, type: "dict_type" });
      return undefined;
    }
    const entries = Object.entries(criteria);
    checkCount(entries.length, MIN_OPTIONS, MAX_OPTIONS, loc, CHOICE_MSG.count, violations);
    const options = entries.map(([name, description]) => {
      const d = optionalDescription(description, [...loc, name], violations, true);
      return { name, description: d === undefined ? undefined : jsonToProtoValue(d as JsonValue) };
    });
    return { case: "choice", value: { options } };
  },

  criteriaFromProto(criteria, loc, violations) {
    if (criteria.case !== "choice") {
      violations.push(
        criteria.case === undefined ? { loc, msg: MSG.required, type: "missing" } : { loc, msg: CHOICE_MSG.criteria, type: "dict_type" },
      );
      return undefined;
    }
    const options = criteria.value.options;
    checkCount(options.length, MIN_OPTIONS, MAX_OPTIONS, loc, CHOICE_MSG.count, violations);
    const names = new Set<string>();
    return options.map((option): [string, JsonValue | undefined] => {
      const optionLoc = [...loc, option.name];
      if (names.has(option.name)) violations.push({ loc: optionLoc, msg: CHOICE_MSG.duplicate, type: "duplicate" });
      names.add(option.name);
      return [option.name, optionalDescription(protoValueToJson(option.description), optionLoc, violations, false)];
    });
  },

  render(criteria, available) {
    const entries = optionsOf(criteria);
    const labels = labelsFor(available, entries.length, "options of a choice question");
    const options = entries.map(([name, description], i) => ({ label: labels[i], name, description: valueToText(description) }));
    return { variables: { options }, labels };
  },

  answer(criteria, logits, temperature) {
    const names = optionsOf(criteria).map(([name]) => name);
    const r = choiceFromLogits(logits, temperature);
    return {
      type: QuestionType.CHOICE,
      result: {
        case: "choice",
        value: {
          choice: names[r.index]!,
          probabilities: r.probabilities.map((probability, i) => ({ option: names[i]!, probability })),
          confidence: r.confidence,
        },
      },
    };
  },

  answerToJson(result) {
    if (result.case !== "choice") return undefined;
    const probabilities: { [option: string]: number } = {};
    for (const p of result.value.probabilities) defineKey(probabilities, p.option, finite(p.probability));
    return { type: "choice", choice: result.value.choice, probabilities, confidence: finite(result.value.confidence) };
  },

  labelIndex(criteria, label) {
    const names = optionsOf(criteria).map(([name]) => name);
    const index = typeof label === "string" ? names.indexOf(label) : -1;
    return index >= 0
      ? { index }
      : { problem: `the answer to a choice question must be the name of one of its options: ${quotedList(names)}` };
  },
};
