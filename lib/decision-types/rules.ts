// The rules of a decision request that are not about one question type, shared by the gateway's
// JSON mapper and the decision service's check of proto requests, so both report the same problems
// in the same words. Each question type's own rules live in its module (noul.ts, choice.ts, score.ts).

export const MIN_QUESTIONS = 1;
/** Each question is a row of the readout batch; this bounds one request's work and memory. */
export const MAX_QUESTIONS = 256;
/** Longest state, in characters of its JSON text (a string state: its length); about 250k tokens. */
export const MAX_STATE_CHARS = 1024 * 1024;
/** Deepest nesting of objects and arrays accepted in state, instructions and descriptions. */
export const MAX_JSON_DEPTH = 64;

/** Where a problem is: ["body", "questions", "<id>", "criteria", …]. */
export type Loc = (string | number)[];

/** One problem, located FastAPI-style. */
export interface Violation {
  loc: Loc;
  msg: string;
  type: string;
}

export const MSG = {
  required: "Field required",
  model: "model must be a non-empty string",
  state: "state must be a string, an object or an array",
  questionsObject: "questions must be an object mapping question ids to questions",
  questionsEmpty: `questions must hold at least ${MIN_QUESTIONS} question`,
  questionsTooMany: `questions may hold at most ${MAX_QUESTIONS} questions`,
  stateTooLong: `state may be at most ${MAX_STATE_CHARS} characters long (as JSON text)`,
  questionId: "question ids must be non-empty strings",
  questionDuplicate: "question id given more than once",
  questionObject: "a question must be an object",
  instructions: "instructions must be a string, an object or an array",
  description: "a description must be a string, an object, an array or null",
  depth: `objects and arrays may be nested at most ${MAX_JSON_DEPTH} deep`,
} as const;

/** The size MAX_STATE_CHARS limits: a string's length, or the length of an object's or array's JSON text. */
export function stateChars(state: unknown): number {
  return typeof state === "string" ? state.length : (JSON.stringify(state)?.length ?? 0);
}

/**
 * The state: required, a string, an object or an array, at most MAX_STATE_CHARS. `depthChecked`
 * says whether nesting is checked first (JSON from a client; see checkDepth).
 */
export function checkState(state: unknown, violations: Violation[], depthChecked: boolean): void {
  const loc = ["body", "state"];
  if (state === undefined) violations.push({ loc, msg: MSG.required, type: "missing" });
  else if (!isDescription(state)) violations.push({ loc, msg: MSG.state, type: "value_type" });
  else if ((!depthChecked || checkDepth(state, loc, violations)) && stateChars(state) > MAX_STATE_CHARS) {
    violations.push({ loc, msg: MSG.stateTooLong, type: "too_long" });
  }
}

/** 1 to MAX_QUESTIONS questions; false when there are too many to look at each. */
export function checkQuestionCount(count: number, violations: Violation[]): boolean {
  if (count < MIN_QUESTIONS) violations.push({ loc: ["body", "questions"], msg: MSG.questionsEmpty, type: "too_short" });
  // Too many questions are refused without looking at each (that would be the work the limit avoids).
  if (count > MAX_QUESTIONS) {
    violations.push({ loc: ["body", "questions"], msg: MSG.questionsTooMany, type: "too_long" });
    return false;
  }
  return true;
}

export function checkQuestionId(id: string, violations: Violation[]): void {
  if (id === "") violations.push({ loc: ["body", "questions", id], msg: MSG.questionId, type: "string_too_short" });
}

/** What instructions and descriptions may be: a string, an object or an array (null or absent: none). */
export function isDescription(v: unknown): v is string | object {
  return typeof v === "string" || (typeof v === "object" && v !== null);
}

/**
 * An optional description or instructions: undefined when absent or null, the value when it is a
 * description, else a violation (`msg`) and undefined. `depthChecked` as for checkState.
 */
export function optionalDescription<T>(
  value: T | null | undefined,
  loc: Loc,
  violations: Violation[],
  depthChecked: boolean,
  msg: string = MSG.description,
): T | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isDescription(value)) {
    violations.push({ loc, msg, type: "value_type" });
    return undefined;
  }
  return !depthChecked || checkDepth(value, loc, violations) ? value : undefined;
}

/**
 * Nesting deeper than MAX_JSON_DEPTH is refused before anything recurses over it (the proto
 * conversion and the renderer do). Measured without recursion, so any depth is safe to check.
 */
export function checkDepth(value: unknown, loc: Loc, violations: Violation[]): boolean {
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

/** A count of options or levels between min and max. */
export function checkCount(count: number, min: number, max: number, loc: Loc, msg: string, violations: Violation[]): void {
  if (count < min) violations.push({ loc, msg, type: "too_short" });
  if (count > max) violations.push({ loc, msg, type: "too_long" });
}

/** A user's key read with own-property semantics only ("__proto__" and "constructor" are plain keys). */
export function own(obj: { [key: string]: unknown }, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

export function isObject(v: unknown): v is { [key: string]: unknown } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
