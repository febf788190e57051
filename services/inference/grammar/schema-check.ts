/**
 * What a JSON Schema may use to be enforced by the grammar. XGrammar's converter ignores some
 * keywords silently (`not`, `if`, `uniqueItems`, `multipleOf`, …) and reads `oneOf` as
 * `anyOf`; a reply it allows could then fail the schema. So a schema is checked here first,
 * and one that uses anything outside this list is refused, naming the keyword and where it is.
 * The converter also aborts on some malformed input (an unknown type, a `$ref` that points
 * nowhere, a bad regular expression); those are caught here too, with a clearer message.
 */

import { firstInfinite } from "./schema-finite.js";

/** Keywords that constrain and that the grammar enforces exactly. */
const ENFORCED = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "enum",
  "const",
  "anyOf",
  "$ref",
  "$defs",
  "definitions",
  "minLength",
  "maxLength",
  "pattern",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
]);

/** Keywords that only annotate (no effect on validity), accepted and ignored. */
const ANNOTATIONS = new Set([
  "$schema",
  "$id",
  "$comment",
  "title",
  "description",
  "default",
  "examples",
  "deprecated",
  "readOnly",
  "writeOnly",
  "format",
  "nullable",
  "strict",
  "propertyOrdering",
]);

/**
 * The largest length or item-count bound: XGrammar expands a bound into that many states, and
 * compiling costs about 10 ms per unit on an 8,192-token vocabulary (bench/grammar.ts).
 */
const MAX_BOUND = 256;

const TYPES = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);

export interface SchemaLimits {
  /** Most characters of the schema as JSON. */
  maxChars: number;
  /** Most subschemas (every object node counts). */
  maxNodes: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxChars: 64 * 1024, maxNodes: 2000 };

/** A schema the grammar cannot take; `message` names the problem and where it is. */
export class SchemaError extends Error {}

/**
 * Checks that `schema` can be enforced; throws SchemaError otherwise. `where` names the
 * schema in messages (e.g. `response_format.json_schema.schema`).
 */
export function checkSchema(schema: unknown, where: string, limits: SchemaLimits = DEFAULT_SCHEMA_LIMITS): void {
  const text = JSON.stringify(schema) ?? "";
  if (text.length > limits.maxChars) {
    throw new SchemaError(`${where} is too large for a grammar: ${text.length} characters, at most ${limits.maxChars}`);
  }
  let nodes = 0;
  const visit = (node: unknown, path: string): void => {
    if (typeof node === "boolean") {
      if (node === false) throw new SchemaError(`${path} is \`false\`: no value can match it`);
      return;
    }
    if (typeof node !== "object" || node === null || Array.isArray(node)) {
      throw new SchemaError(`${path} must be a schema object`);
    }
    if (++nodes > limits.maxNodes) throw new SchemaError(`${where} is too large for a grammar: more than ${limits.maxNodes} subschemas`);
    const obj = node as Record<string, unknown>;
    for (const [key, value] of Object.entries(obj)) {
      const at = `${path}.${key}`;
      if (ANNOTATIONS.has(key)) continue;
      if (!ENFORCED.has(key)) {
        throw new SchemaError(`${at}: the keyword "${key}" cannot be enforced by the grammar${hint(key)}`);
      }
      switch (key) {
        case "type": {
          const types = Array.isArray(value) ? value : [value];
          if (types.length === 0) throw new SchemaError(`${at} must not be empty`);
          for (const t of types)
            if (typeof t !== "string" || !TYPES.has(t)) throw new SchemaError(`${at}: unknown type ${JSON.stringify(t)}`);
          break;
        }
        case "properties":
        case "$defs":
        case "definitions":
          if (!isPlainObject(value)) throw new SchemaError(`${at} must be an object`);
          for (const [name, sub] of Object.entries(value)) visit(sub, `${at}.${name}`);
          break;
        case "additionalProperties":
          if (typeof value !== "boolean") visit(value, at);
          break;
        case "items":
          if (typeof value !== "boolean") visit(value, at);
          break;
        case "prefixItems":
        case "anyOf":
          if (!Array.isArray(value) || value.length === 0) throw new SchemaError(`${at} must be a non-empty array`);
          for (const [i, sub] of value.entries()) visit(sub, `${at}[${i}]`);
          break;
        case "required":
          if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) throw new SchemaError(`${at} must be an array of strings`);
          break;
        case "enum":
          if (!Array.isArray(value) || value.length === 0) throw new SchemaError(`${at} must be a non-empty array`);
          break;
        case "minItems":
        case "maxItems":
        case "minLength":
        case "maxLength":
          if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw new SchemaError(`${at} must be an integer >= 0`);
          if (value > MAX_BOUND) {
            throw new SchemaError(
              `${at}: bounds above ${MAX_BOUND} cannot be enforced (the grammar spells out every repetition and would compile for seconds)`,
            );
          }
          break;
        case "minimum":
        case "maximum":
        case "exclusiveMinimum":
        case "exclusiveMaximum":
          if (typeof value !== "number" || !Number.isInteger(value)) {
            throw new SchemaError(`${at}: only integer bounds can be enforced by the grammar, got ${JSON.stringify(value)}`);
          }
          break;
        case "pattern":
          checkPattern(value, at);
          break;
        case "$ref":
          if (typeof value !== "string") throw new SchemaError(`${at} must be a string`);
          resolveRef(schema, value, at);
          break;
      }
    }
    if (typeof obj.minItems === "number" && typeof obj.maxItems === "number" && obj.minItems > obj.maxItems) {
      throw new SchemaError(`${path}: minItems is greater than maxItems`);
    }
    if (typeof obj.minLength === "number" && typeof obj.maxLength === "number" && obj.minLength > obj.maxLength) {
      throw new SchemaError(`${path}: minLength is greater than maxLength`);
    }
    if (Array.isArray(obj.required) && obj.additionalProperties === false) {
      const props = isPlainObject(obj.properties) ? obj.properties : {};
      for (const name of obj.required as string[]) {
        if (!(name in props))
          throw new SchemaError(`${path}.required: "${name}" is required but not allowed (additionalProperties is false)`);
      }
    }
  };
  visit(schema, where);
  const infinite = firstInfinite(schema, where, (ref) => resolveRef(schema, ref, where));
  if (infinite !== undefined) {
    throw new SchemaError(
      `${infinite} has no finite value: every value of it must contain another (a $ref cycle through required properties or items), so no grammar can end`,
    );
  }
}

function hint(key: string): string {
  if (key === "oneOf") return " (use anyOf: the grammar cannot exclude values that match several branches)";
  if (key === "allOf") return " (merge the branches into one schema)";
  return "";
}

function checkPattern(value: unknown, at: string): void {
  if (typeof value !== "string") throw new SchemaError(`${at} must be a string`);
  try {
    new RegExp(value, "u");
  } catch (err) {
    throw new SchemaError(`${at} is not a valid regular expression: ${err instanceof Error ? err.message : String(err)}`);
  }
  // Lookarounds and backreferences have no grammar form.
  if (/\(\?[=!<]|\\[1-9]|\\k</.test(value)) {
    throw new SchemaError(`${at}: lookarounds and backreferences cannot be enforced by the grammar`);
  }
}

/** Only local references (`#`, `#/$defs/x`, `#/definitions/x`, any JSON pointer into the schema). */
function resolveRef(root: unknown, ref: string, at: string): unknown {
  if (!ref.startsWith("#")) throw new SchemaError(`${at}: only local references ("#/...") are supported, got "${ref}"`);
  let node: unknown = root;
  const pointer = ref.slice(1);
  if (pointer === "") return root;
  if (!pointer.startsWith("/")) throw new SchemaError(`${at}: "${ref}" is not a JSON pointer`);
  for (const raw of pointer.slice(1).split("/")) {
    const part = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (!isPlainObject(node) || !(part in node)) throw new SchemaError(`${at}: "${ref}" points to nothing in the schema`);
    node = node[part];
  }
  if (typeof node !== "boolean" && !isPlainObject(node)) throw new SchemaError(`${at}: "${ref}" does not point to a schema`);
  return node;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
