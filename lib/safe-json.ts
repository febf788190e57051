// Parsing and copying of JSON that comes from users.
//
// JSON.parse itself is safe from prototype pollution: a "__proto__" key becomes an own data
// property, never the object's prototype. What is not safe is what code does next: copying
// with Object.assign or `target[key] = value` turns that own "__proto__" into a prototype
// swap, and recursive code (JSON.stringify, protobuf conversion, template rendering) dies
// with a RangeError on JSON nested a few thousand levels deep, which JSON.parse accepts.
// So user JSON is checked for depth before it is parsed, and copied only with the helpers
// here, which define own properties.

/** Deepest nesting of objects and arrays accepted in a request body. */
export const MAX_JSON_DEPTH = 128;

/** Why a JSON text was refused, and at which character. */
export type JsonParseFailure = { reason: "syntax"; position: number; message: string } | { reason: "depth"; position: number; limit: number };

export type JsonParseResult = { ok: true; value: unknown } | ({ ok: false } & JsonParseFailure);

/**
 * The character position where `text` opens its `limit + 1`-th level of nesting, or -1 when
 * it never nests deeper than `limit`. One pass without recursion; brackets inside strings
 * do not count. The text need not be valid JSON (the parse that follows finds that out).
 */
export function depthExceededAt(text: string, limit: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > limit) return i;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) depth--;
  }
  return -1;
}

/** JSON.parse behind a depth check; never throws. */
export function parseJsonText(text: string, maxDepth = MAX_JSON_DEPTH): JsonParseResult {
  const deep = depthExceededAt(text, maxDepth);
  if (deep >= 0) return { ok: false, reason: "depth", position: deep, limit: maxDepth };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    const message = (err as Error).message;
    const at = /position (\d+)/.exec(message)?.[1];
    const position = at !== undefined ? Number(at) : /end of JSON input/.test(message) ? text.length : 0;
    return { ok: false, reason: "syntax", position, message };
  }
}

/** Own-property lookup: never reads through the prototype chain (`obj.constructor`, `obj.__proto__`). */
export function ownValue(obj: object, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
}

/** Writes an own, enumerable property, also for the keys "__proto__", "constructor" and "prototype". */
export function defineOwn<T>(target: { [key: string]: T }, key: string, value: T): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * A deep copy of parsed JSON in which every key, "__proto__" included, is an own data
 * property of a plain object, and nothing is shared with the input. Iterative, so any depth
 * is safe; values that JSON cannot hold (functions, undefined) are left out as JSON.stringify
 * would, non-finite numbers become null.
 */
export function copyJson(value: unknown): unknown {
  const root: { value?: unknown } = {};
  const work: { from: unknown; into: Record<string, unknown> | unknown[]; key: string | number }[] = [{ from: value, into: root as Record<string, unknown>, key: "value" }];
  while (work.length > 0) {
    const { from, into, key } = work.pop()!;
    let copy: unknown;
    if (from === null || typeof from === "string" || typeof from === "boolean") copy = from;
    else if (typeof from === "number") copy = Number.isFinite(from) ? from : null;
    else if (Array.isArray(from)) {
      const list: unknown[] = new Array(from.length).fill(null);
      from.forEach((item, i) => work.push({ from: item, into: list, key: i }));
      copy = list;
    } else if (typeof from === "object") {
      const object: Record<string, unknown> = {};
      for (const k of Object.keys(from)) {
        const v = (from as Record<string, unknown>)[k];
        if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
        defineOwn(object, k, null);
        work.push({ from: v, into: object, key: k });
      }
      copy = object;
    } else continue;
    if (Array.isArray(into)) into[key as number] = copy;
    else defineOwn(into, key as string, copy);
  }
  return root.value;
}
