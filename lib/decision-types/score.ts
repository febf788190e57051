// score: a level on an ordered scale of 2 to 10 levels, answered with the expected level, each
// level's probability and a confidence.
import type { JsonValue } from "@bufbuild/protobuf";
import { QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { defineKey } from "./json-value.js";
import { scoreFromLogits } from "./probabilities.js";
import { finite, labelsFor, type QuestionTypeModule, quotedList, valueToText } from "./question-type.js";
import { checkCount, checkDepth, MSG } from "./rules.js";

export const MIN_LEVELS = 2;
export const MAX_LEVELS = 10;

export interface ScoreQuestionJson {
  type: "score";
  instructions?: JsonValue;
  /** The level texts, lowest first (a structured level as the JSON text the model reads). */
  criteria: readonly string[];
}

export interface ScoreAnswerJson {
  type: "score";
  score: number;
  legend: { [level: string]: string };
  probabilities: { [level: string]: number };
  confidence: number;
}

const SCORE_MSG = {
  criteria: "criteria of a score question must be an array of levels, lowest first",
  count: `a score question needs ${MIN_LEVELS} to ${MAX_LEVELS} levels`,
  level: "a level must be a string, an object, an array or null",
};

export const score: QuestionTypeModule<ScoreQuestionJson, ScoreAnswerJson> = {
  name: "score",
  proto: QuestionType.SCORE,

  checkLabels: (labels) => (labels.length >= MIN_LEVELS ? undefined : `labels.score needs at least ${MIN_LEVELS} labels`),

  criteriaFromJson(criteria, loc, violations) {
    if (criteria === undefined || criteria === null) {
      violations.push({ loc, msg: MSG.required, type: "missing" });
      return undefined;
    }
    if (!Array.isArray(criteria)) {
      violations.push({ loc, msg: SCORE_MSG.criteria, type: "list_type" });
      return undefined;
    }
    checkCount(criteria.length, MIN_LEVELS, MAX_LEVELS, loc, SCORE_MSG.count, violations);
    // An object, array or null level is rendered as instructions and descriptions are (valueToText),
    // and that text is the level's `legend` entry (the document's map of strings).
    const levels = criteria.map((level: unknown, i) => {
      if (level === null) return "";
      if (typeof level === "string") return level;
      const at = [...loc, i];
      if (typeof level !== "object") violations.push({ loc: at, msg: SCORE_MSG.level, type: "value_type" });
      else if (checkDepth(level, at, violations)) return valueToText(level as JsonValue);
      return "";
    });
    return { case: "score", value: { levels } };
  },

  criteriaFromProto(criteria, loc, violations) {
    if (criteria.case !== "score") {
      violations.push(
        criteria.case === undefined ? { loc, msg: MSG.required, type: "missing" } : { loc, msg: SCORE_MSG.criteria, type: "list_type" },
      );
      return undefined;
    }
    checkCount(criteria.value.levels.length, MIN_LEVELS, MAX_LEVELS, loc, SCORE_MSG.count, violations);
    return criteria.value.levels;
  },

  render(criteria, available) {
    const labels = labelsFor(available, criteria.length, "levels of a score question");
    return { variables: { levels: criteria.map((text, i) => ({ label: labels[i], text })) }, labels };
  },

  answer(criteria, logits, temperature) {
    const r = scoreFromLogits(logits, temperature);
    return {
      type: QuestionType.SCORE,
      result: {
        case: "score",
        value: { score: r.score, legend: [...criteria], probabilities: r.probabilities, confidence: r.confidence },
      },
    };
  },

  answerToJson(result) {
    if (result.case !== "score") return undefined;
    const legend: { [level: string]: string } = {};
    const probabilities: { [level: string]: number } = {};
    result.value.legend.forEach((text, i) => {
      defineKey(legend, String(i), text);
    });
    result.value.probabilities.forEach((p, i) => {
      defineKey(probabilities, String(i), finite(p));
    });
    return { type: "score", score: finite(result.value.score), legend, probabilities, confidence: finite(result.value.confidence) };
  },

  // A level by its number (as the answer's `score` and `legend` count them) or by its text.
  labelIndex(criteria, label) {
    if (typeof label === "number" && Number.isInteger(label) && label >= 0 && label < criteria.length) return { index: label };
    const index = typeof label === "string" ? criteria.indexOf(label) : -1;
    if (index >= 0) return { index };
    return {
      problem: `the answer to a score question must be a level's number (0 to ${criteria.length - 1}, lowest first) or its text: ${quotedList(criteria)}`,
    };
  },
};
