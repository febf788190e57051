import type { z } from "zod";

/**
 * Zod issues → the OpenAI 400 of a request body: a message in OpenAI's wording, `param`
 * naming the field (`messages[2].role`) and an OpenAI `code`. Every schema of gateway/schemas
 * follows one convention so that a single issue is enough to word the answer:
 *
 * - type errors (`invalid_type`, and `invalid_union` of alternatives of different types)
 *   carry in `message` only what was expected ("a string or an array of strings"); zod's own
 *   wording is replaced by OPENAI_WORDING below;
 * - checks made by refinements are `custom` issues whose message is final and whose
 *   `params.code` is the OpenAI code (see `refuse`); `{param}` in it stands for the field.
 */

export interface RequestError {
  message: string;
  /** The request field at fault, e.g. `messages[2].role`; null for the body as a whole. */
  param: string | null;
  /** OpenAI-style code: missing_required_parameter, invalid_type, invalid_value, empty_array, … */
  code: string;
}

/** `["messages", 2, "role"]` → `messages[2].role`. */
export function paramOf(path: readonly PropertyKey[]): string | null {
  if (path.length === 0) return null;
  let param = "";
  for (const part of path) {
    if (typeof part === "number") param += `[${part}]`;
    else param += param === "" ? String(part) : `.${String(part)}`;
  }
  return param;
}

/** How OpenAI names a JSON value's type in its messages. */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return "a string";
    case "number":
      return Number.isInteger(value) ? "an integer" : "a decimal";
    case "boolean":
      return "a boolean";
    case "object":
      return "an object";
    default:
      return typeof value;
  }
}

const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
  record: "an object",
};

/**
 * The parse-level error map: type errors say what was expected (unless the schema gave its
 * own `error`, which then is that description); other issues keep zod's message.
 */
export const OPENAI_WORDING: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === "invalid_type") return EXPECTED[issue.expected] ?? `a value of type ${issue.expected}`;
  return undefined;
};

/** Parse options every request schema is run with. */
export const PARSE_OPTIONS = { reportInput: true, error: OPENAI_WORDING } as const;

/** Adds a refinement's issue: a final message and an OpenAI code, at `path` below the refined value. */
export function refuse(
  ctx: Pick<z.core.$RefinementCtx<unknown>, "addIssue" | "value">,
  message: string,
  code: string,
  path: PropertyKey[] = [],
): void {
  ctx.addIssue({ code: "custom", message, params: { code }, path, input: ctx.value });
}

/** A refused-value message in OpenAI's words. */
export function badValueMessage(param: string | null, got: unknown, supported: readonly unknown[]): string {
  const shown = typeof got === "string" ? `'${got.slice(0, 100)}'` : typeName(got);
  const list = supported.map((s) => `'${String(s)}'`).join(", ");
  return `Invalid value for '${param}': ${shown}. Supported values are: ${list}.`;
}

export function missingMessage(param: string | null): string {
  return `Missing required parameter: '${param}'.`;
}

/** The first issue of a failed parse, worded as OpenAI words it. */
export function requestErrorOf(error: z.ZodError): RequestError {
  const issue = error.issues[0];
  if (issue === undefined) return { message: "The request is invalid.", param: null, code: "invalid_request" };
  return wordIssue(issue);
}

function wordIssue(issue: z.core.$ZodIssue): RequestError {
  const param = paramOf(issue.path);
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case "invalid_type":
      if (input === undefined || input === null) {
        if (param === null) return { message: bodyMessage(input), param, code: "invalid_type" };
        return { message: missingMessage(param), param, code: "missing_required_parameter" };
      }
      return { message: wrongTypeMessage(param, issue.message, input), param, code: "invalid_type" };
    case "invalid_union": {
      if ("discriminator" in issue && "options" in issue && issue.discriminator !== undefined) {
        // No alternative has this discriminator: the path ends at it; the input is the object holding it.
        const got = (input as Record<string, unknown> | undefined)?.[issue.discriminator];
        if (got === undefined || got === null) return { message: missingMessage(param), param, code: "missing_required_parameter" };
        return { message: badValueMessage(param, got, issue.options ?? []), param, code: "invalid_value" };
      }
      if (input === undefined || input === null) return { message: missingMessage(param), param, code: "missing_required_parameter" };
      // The alternative whose type matched (`stop: ["a", 1]` is an array with a bad item) says what is wrong.
      let best: z.core.$ZodIssue | undefined;
      let bestScore = 0;
      for (const alternative of issue.errors) {
        const first = alternative[0];
        const score = first === undefined ? 0 : typeMatch(first, input);
        if (score > bestScore) {
          best = first;
          bestScore = score;
        }
      }
      if (best !== undefined) return wordIssue({ input, ...best, path: [...issue.path, ...best.path] } as z.core.$ZodIssue);
      return { message: wrongTypeMessage(param, issue.message, input), param, code: "invalid_type" };
    }
    case "invalid_value":
      if (input === undefined || input === null) return { message: missingMessage(param), param, code: "missing_required_parameter" };
      return { message: badValueMessage(param, input, issue.values), param, code: "invalid_value" };
    case "custom": {
      const code = (issue.params as { code?: string } | undefined)?.code ?? "invalid_value";
      // Schemas that do not know where they sit write `{param}`.
      return { message: issue.message.replaceAll("{param}", param ?? "body"), param, code };
    }
    default:
      return { message: `Invalid '${param}': ${issue.message}`, param, code: "invalid_value" };
  }
}

/** How far an alternative of a union got with `input`: 0 when its type is not the input's. */
function typeMatch(issue: z.core.$ZodIssue, input: unknown): number {
  if (issue.path.length > 0) return 1 + issue.path.length;
  if (issue.code === "invalid_type") return 0;
  // An enum of strings refuses a number as a value, but it is a type mismatch.
  if (issue.code === "invalid_value") return issue.values.some((v) => typeof v === typeof input) ? 1 : 0;
  return 1;
}

function bodyMessage(input: unknown): string {
  return `The request body must be a JSON object, but got ${typeName(input)} instead.`;
}

function wrongTypeMessage(param: string | null, expected: string, input: unknown): string {
  if (param === null) return bodyMessage(input);
  return `Invalid type for '${param}': expected ${expected}, but got ${typeName(input)} instead.`;
}
