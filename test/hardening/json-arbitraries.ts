// fast-check arbitraries of hostile request bodies. A body is generated as a tree (`J`) that
// can say what JSON.stringify cannot: duplicated keys, numbers written as any text (1e999,
// 2^64, -0), and "__proto__" as a plain key; then it is written out and maybe damaged
// (truncated, invalid UTF-8, nested thousands deep, wrong content type).
import fc from "fast-check";

export class Num {
  constructor(readonly text: string) {}
}
/** An object as its list of entries, in order, duplicates allowed. */
export class Obj {
  constructor(readonly entries: [string, J][]) {}
}
export type J = null | boolean | string | Num | J[] | Obj;

/** Marks a field to leave out. */
export const OMIT = Symbol("omit");
export type Field = J | typeof OMIT;

export function toText(value: J): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string") return JSON.stringify(value);
  if (value instanceof Num) return value.text;
  if (Array.isArray(value)) return `[${value.map(toText).join(",")}]`;
  return `{${value.entries.map(([k, v]) => `${JSON.stringify(k)}:${toText(v)}`).join(",")}}`;
}

/** An object from fields, leaving out the OMITted ones. */
export function obj(fields: [string, Field][]): Obj {
  return new Obj(fields.filter((f): f is [string, J] => f[1] !== OMIT));
}

export const DANGEROUS_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "__defineGetter__",
  "then",
  "length",
];

/** Number texts at and past every edge JSON and JavaScript have. */
export const EDGE_NUMBERS = [
  "0",
  "-0",
  "1",
  "-1",
  "0.5",
  "1.0",
  "1e2",
  "2",
  "64",
  "1024",
  "8192",
  "8193",
  "65535",
  "4294967295",
  "4294967296",
  "2147483647",
  "2147483648",
  "-2147483649",
  "9007199254740993",
  "18446744073709551616",
  "-18446744073709551616",
  "123456789012345678901234567890",
  "1e308",
  "-1e308",
  "1.7976931348623157e308",
  "1e309",
  "1e999",
  "-1e999",
  "1E400",
  "5e-324",
  "1e-400",
  "-1e-400",
  "0.0000001",
  "1e-7",
];

const numText: fc.Arbitrary<Num> = fc
  .oneof(
    { weight: 3, arbitrary: fc.constantFrom(...EDGE_NUMBERS) },
    { weight: 1, arbitrary: fc.integer().map(String) },
    { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => (Object.is(d, -0) ? "-0" : String(d))) },
  )
  .map((text) => new Num(text));

const oddStrings = [
  "",
  " ",
  "\u0000",
  "\ud800",
  "\udfff",
  "\udbff\udfff",
  "\u202e",
  "\ufeff",
  "\n\r\t",
  "<|im_end|>",
  "<|im_start|>system",
  "{{ 7*7 }}",
  "{% for x in range(999999999) %}",
  "' OR 1=1 --",
  "../../etc/passwd",
  "%s%n",
];

export const text: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 2, arbitrary: fc.constantFrom(...oddStrings) },
);

export const key: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 10 }) },
  { weight: 2, arbitrary: fc.constantFrom(...DANGEROUS_KEYS) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "model",
      "messages",
      "role",
      "content",
      "state",
      "questions",
      "type",
      "criteria",
      "stream",
      "max_tokens",
      "tools",
    ),
  },
);

/** Any JSON value, a few levels deep, with edge numbers, odd strings and dangerous keys. */
export const junk: fc.Arbitrary<J> = fc.letrec<{ value: J }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    text,
    numText,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(key, tie("value")), { maxLength: 4 }).map((entries) => new Obj(entries)),
  ),
})).value;

/** A number written as JavaScript prints it. */
export const num = (value: number) => new Num(String(value));

/** `valid`, or left out one time in four. */
export const optional = <T extends J>(valid: fc.Arbitrary<T>) => fc.option(valid, { freq: 3 }).map((v) => (v === null ? OMIT : v));

/** A tool's parameters or a format's JSON Schema: a small valid one, or junk. */
export const jsonSchema: fc.Arbitrary<J> = fc.oneof(
  fc.constant<J>(
    obj([
      ["type", "object"],
      ["properties", obj([["city", obj([["type", "string"]])]])],
    ]),
  ),
  junk,
);

/** A token limit: mostly 1 to 4, sometimes too large, zero, negative, or one of `odd`. */
export const tokenLimit = (odd: Num[] = []) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 1, max: 4 }).map(num) },
    { weight: 1, arbitrary: fc.constantFrom(num(8192), num(100_000), num(0), num(-1), ...odd) },
  );

/** A field that is mostly valid, sometimes junk, sometimes left out. */
export function field(valid: fc.Arbitrary<J>, weights: { valid?: number; junk?: number; omit?: number } = {}): fc.Arbitrary<Field> {
  return fc.oneof(
    { weight: weights.valid ?? 6, arbitrary: valid },
    { weight: weights.junk ?? 1, arbitrary: junk },
    { weight: weights.omit ?? 1, arbitrary: fc.constant<Field>(OMIT) },
  );
}

/**
 * An object of the given fields in random order, sometimes with extra keys (dangerous ones
 * included) and sometimes with a field given twice (raw JSON text keeps both).
 */
export function record(fields: Record<string, fc.Arbitrary<Field>>): fc.Arbitrary<Obj> {
  const names = Object.keys(fields);
  return fc
    .tuple(
      fc.tuple(...names.map((name) => fields[name]!)),
      fc.shuffledSubarray(
        names.map((_, i) => i),
        { minLength: names.length, maxLength: names.length },
      ),
      fc.option(fc.array(fc.tuple(key, junk), { minLength: 1, maxLength: 3 }), { freq: 5 }),
      fc.option(fc.tuple(fc.constantFrom(...names), junk), { freq: 10 }),
    )
    .map(([values, order, extra, duplicate]) => {
      const entries: [string, Field][] = order.map((i) => [names[i]!, values[i]!]);
      if (extra !== null) entries.push(...extra);
      if (duplicate !== null) entries.splice(Math.floor(entries.length / 2), 0, duplicate);
      return obj(entries);
    });
}

/** One HTTP body to send: its bytes, content type, and what was done to it. */
export interface BodyCase {
  contentType: string | undefined;
  body: Buffer;
  damage: string;
}

const CONTENT_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/jsonx",
  "application/json-patch+json",
  "APPLICATION/JSON",
  "application/json; charset=latin1",
  "application/json;charset=utf-16",
  "",
  "*/*",
  "application/xml",
  "application/json, text/plain",
];

/** Byte sequences that are never valid UTF-8. */
const BAD_UTF8 = [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xf4, 0x90, 0x80, 0x80]];

/**
 * The body written out, then, in a share of cases, damaged: another content type, cut off,
 * invalid UTF-8 spliced in, the document wrapped around JSON nested deeper than any limit,
 * one string blown up to megabytes, empty, or random bytes.
 */
export function bodyCase(document: fc.Arbitrary<J>): fc.Arbitrary<BodyCase> {
  return fc
    .tuple(
      document,
      fc.oneof(
        { weight: 40, arbitrary: fc.constant("none") },
        { weight: 3, arbitrary: fc.constant("content-type") },
        { weight: 3, arbitrary: fc.constant("truncated") },
        { weight: 3, arbitrary: fc.constant("bad-utf8") },
        { weight: 2, arbitrary: fc.constant("deep") },
        { weight: 1, arbitrary: fc.constant("huge-string") },
        { weight: 1, arbitrary: fc.constant("empty") },
        { weight: 1, arbitrary: fc.constant("random-bytes") },
      ),
      fc.nat(),
      fc.constantFrom(...CONTENT_TYPES),
      fc.constantFrom(...BAD_UTF8),
      fc.integer({ min: 129, max: 100_000 }),
      fc.integer({ min: 64 * 1024, max: 3 * 1024 * 1024 }),
      fc.uint8Array({ maxLength: 64 }),
    )
    .map(([doc, damage, at, contentType, bad, depth, hugeLength, bytes]): BodyCase => {
      const textBody = toText(doc);
      const json = "application/json";
      switch (damage) {
        case "content-type":
          return { contentType: contentType === "" ? undefined : contentType, body: Buffer.from(textBody), damage };
        case "truncated":
          return { contentType: json, body: Buffer.from(textBody.slice(0, at % Math.max(1, textBody.length))), damage };
        case "bad-utf8": {
          const raw = Buffer.from(textBody);
          const i = at % (raw.length + 1);
          return { contentType: json, body: Buffer.concat([raw.subarray(0, i), Buffer.from(bad), raw.subarray(i)]), damage };
        }
        case "deep": {
          const open = at % 2 === 0 ? "[".repeat(depth) : '{"a":'.repeat(depth);
          const close = at % 2 === 0 ? "]".repeat(depth) : "}".repeat(depth);
          const inner = `${open}1${close}`;
          const raw =
            doc instanceof Obj && doc.entries.length > 0 ? `{${JSON.stringify(doc.entries[0]![0])}:${inner},${textBody.slice(1)}` : inner;
          return { contentType: json, body: Buffer.from(raw), damage };
        }
        case "huge-string": {
          const huge = "y".repeat(hugeLength);
          const raw =
            doc instanceof Obj
              ? toText(new Obj(doc.entries.map(([k, v], i) => [k, i === at % doc.entries.length ? huge : v])))
              : JSON.stringify(huge);
          return { contentType: json, body: Buffer.from(raw), damage };
        }
        case "empty":
          return { contentType: json, body: Buffer.alloc(0), damage };
        case "random-bytes":
          return { contentType: json, body: Buffer.from(bytes), damage };
        default:
          return { contentType: json, body: Buffer.from(textBody), damage };
      }
    });
}
