// The rules of a decision request, shared by the gateway's JSON mapper and the decision service's
// own check of proto requests, so both report the same problems in the same words.

export const MIN_QUESTIONS = 1;
/** Each question is a row of the readout batch; this bounds one request's work and memory. */
export const MAX_QUESTIONS = 256;
/** Longest state, in characters of its JSON text (a string state: its length); about 250k tokens. */
export const MAX_STATE_CHARS = 1024 * 1024;
export const MIN_OPTIONS = 1;
export const MAX_OPTIONS = 128;
export const MIN_LEVELS = 2;
export const MAX_LEVELS = 10;
/** Deepest nesting of objects and arrays accepted in state, instructions and descriptions. */
export const MAX_JSON_DEPTH = 64;

/** One problem, located FastAPI-style: ["body", "questions", "<id>", "criteria", …]. */
export interface Violation {
  loc: (string | number)[];
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
  type: "type must be one of noul, choice, score",
  instructions: "instructions must be a string, an object or an array",
  noulCriteria: 'criteria of a noul question must be an object {"true": …, "false": …} or null',
  noulKey: 'criteria of a noul question takes only "true" and "false"',
  description: "a description must be a string, an object, an array or null",
  choiceCriteria: "criteria of a choice question must be an object {option: description}",
  choiceCount: `a choice question needs ${MIN_OPTIONS} to ${MAX_OPTIONS} options`,
  optionDuplicate: "option given more than once",
  scoreCriteria: "criteria of a score question must be an array of levels, lowest first",
  scoreCount: `a score question needs ${MIN_LEVELS} to ${MAX_LEVELS} levels`,
  level: "a level must be a string",
  depth: `objects and arrays may be nested at most ${MAX_JSON_DEPTH} deep`,
} as const;

/** The size MAX_STATE_CHARS limits: a string's length, or the length of an object's or array's JSON text. */
export function stateChars(state: unknown): number {
  return typeof state === "string" ? state.length : (JSON.stringify(state)?.length ?? 0);
}
