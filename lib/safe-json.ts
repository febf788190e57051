// Parsing JSON that comes from users.
//
// JSON.parse itself is safe from prototype pollution: a "__proto__" key becomes an own data
// property, never the object's prototype. What is not safe is what code does next: copying
// with Object.assign or `target[key] = value` turns that own "__proto__" into a prototype
// swap (so the mappers write keys that come from users with Object.defineProperty:
// `defineKey` in lib/decision-types/json-value.ts, and look up only own properties or fixed
// field names), and recursive code
// (JSON.stringify, protobuf conversion, template rendering) dies with a RangeError on JSON
// nested a few thousand levels deep, which JSON.parse accepts (and spends seconds and
// hundreds of MB on). So a body's depth is checked, in one pass, before it is parsed.

/** Deepest nesting of objects and arrays accepted in a request body. */
export const MAX_JSON_DEPTH = 128;

/** Why a JSON text was refused, and at which character. */
export type JsonParseFailure =
  | { reason: "syntax"; position: number; message: string }
  | { reason: "depth"; position: number; limit: number };

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
