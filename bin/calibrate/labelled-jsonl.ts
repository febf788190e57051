// The operator's labelled decisions for `tessera calibrate`: one /v1/systemone request body per
// line, read by the gateway's own mapper (a line is valid exactly when the API would accept the
// body; `model` may be left out), plus "answers": {question id: the correct answer}, each read
// by its question type's module (noul true/false, a choice's option name, a score's level).
import type { DecideRequest } from "../../gen/tessera/decision/v1/decision_pb.js";
import { parseDecisionRequest } from "../../lib/decision-types/request-json.js";
import type { QuestionTypeName } from "../../lib/decision-types/registry.js";
import { isObject, own, type Violation } from "../../lib/decision-types/rules.js";
import { checkDecideRequest } from "../../services/decision/validate.js";

/** What a line's `model` is when it names none: the command asks the model directory it was given. */
export const CALIBRATION_MODEL = "calibration";

export interface LabelledQuestion {
  id: string;
  type: QuestionTypeName;
  /** The index of the correct answer among the question's labels. */
  target: number;
}

export interface LabelledLine {
  /** 1-based, as editors number lines. */
  line: number;
  request: DecideRequest;
  /** In the request's order, which is the order of the Score results. */
  questions: LabelledQuestion[];
}

export interface LabelledFile {
  lines: LabelledLine[];
  /** "line N: what is wrong", every problem of every line. */
  problems: string[];
}

export function parseLabelledJsonl(text: string): LabelledFile {
  const lines: LabelledLine[] = [];
  const problems: string[] = [];
  text
    .replace(/^\uFEFF/, "")
    .split(/\r?\n/)
    .forEach((raw, i) => {
      if (raw.trim() === "") return;
      const parsed = parseLine(raw, i + 1);
      if (Array.isArray(parsed)) problems.push(...parsed.map((p) => `line ${i + 1}: ${p}`));
      else lines.push(parsed);
    });
  return { lines, problems };
}

/** A labelled line, or its problems. */
function parseLine(raw: string, line: number): LabelledLine | string[] {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (err) {
    return [`not valid JSON (${(err as Error).message})`];
  }
  if (!isObject(body)) return ["must be a JSON object: a /v1/systemone request body with its answers"];
  const parsed = parseDecisionRequest(own(body, "model") === undefined ? { ...body, model: CALIBRATION_MODEL } : body);
  const answers = own(body, "answers");
  const problems: string[] = [];
  if (!isObject(answers)) problems.push('answers: must be an object {"<question id>": <the correct answer>}');
  if (!parsed.ok) return [...problems, ...parsed.violations.map(describe)];
  const checked = checkDecideRequest(parsed.request);
  if (!checked.ok) return [...problems, ...checked.violations.map(describe)];
  if (!isObject(answers)) return problems;

  const questions: LabelledQuestion[] = [];
  for (const { id, type, question } of checked.questions) {
    const label = own(answers, id);
    const where = `answers.${JSON.stringify(id)}`;
    if (label === undefined) {
      problems.push(`${where}: missing (every question needs its correct answer)`);
      continue;
    }
    const found = type.labelIndex(question.criteria, label);
    if ("problem" in found) problems.push(`${where}: ${found.problem}`);
    else questions.push({ id, type: type.name, target: found.index });
  }
  const ids = new Set(checked.questions.map((q) => q.id));
  for (const id of Object.keys(answers)) {
    if (!ids.has(id)) problems.push(`answers.${JSON.stringify(id)}: no question with this id on the line`);
  }
  return problems.length > 0 ? problems : { line, request: parsed.request, questions };
}

function describe(v: Violation): string {
  const loc = v.loc[0] === "body" ? v.loc.slice(1) : v.loc;
  return loc.length > 0 ? `${loc.join(".")}: ${v.msg}` : v.msg;
}
