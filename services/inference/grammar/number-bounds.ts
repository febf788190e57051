/**
 * Numbers a JSON consumer can hold (docs/constrained-decoding.md, "Finishing a value"). XGrammar's
 * JSON rules let a number run on forever (`[1-9] [0-9]*`): a small model under the grammar can
 * write 1,024 digits, and an integer past 2^53 parses to a different number in JavaScript. So:
 *
 * - every `integer` subschema becomes its exact range rule (written here): within the schema's
 *   minimum / maximum where it gives them (the schema's own bounds win), ±(2^53 − 1) where it
 *   does not, so at most 16 digits, no leading zeros;
 * - a `number` with a single bound keeps XGrammar's rule (at most 6 fraction digits, no
 *   exponent) with its open side's integer part bounded to 16 digits;
 * - the converter's shared rules (`basic_integer`, `basic_number`: integers and numbers under
 *   type lists, `json_object`, untyped values) are replaced by bounded ones: integers within
 *   ±(2^53 − 1), and so a number without fraction or exponent; other numbers with an integer
 *   part of at most 16 digits, at most 15 fraction digits
 *   (a double holds 15–17 significant digits) and an exponent of at most 2 digits (every
 *   `1e±99` is a finite double).
 */

export const SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
const FRACTION_DIGITS = 15;
const EXPONENT_DIGITS = 2;
const INTEGER_PART_DIGITS = 16;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Keywords whose value is one subschema, and those whose value is a list or a map of them. */
const ONE = ["items", "additionalProperties", "not", "contains", "if", "then", "else"];
const LIST = ["prefixItems", "anyOf", "oneOf", "allOf"];
const MAP = ["properties", "$defs", "definitions", "patternProperties"];

/** A schema made ready for conversion: integer subschemas stand in as sentinel constants. */
export interface BoundedSchema {
  schema: unknown;
  /** The EBNF of each sentinel's integer range, by sentinel. */
  ranges: Map<string, RangeRule>;
}

/**
 * `schema` (a copy) with every plain integer subschema replaced by a sentinel string constant,
 * whose literal in the converted EBNF `withIntegerRanges` then swaps for the exact range rule:
 * the schema's bounds where it gives them (they win), ±(2^53 − 1) where it does not. XGrammar's
 * own range rules cannot be used: `minimum: 5` alone becomes `[5-9] | [1-9] [0-9]*` (1–4 get
 * through and it never ends), and a negative range such as [−9999, −11] lets −2^53 + 1 through.
 */
export function withNumberBounds(schema: unknown): BoundedSchema {
  const ranges = new Map<string, RangeRule>();
  return { schema: bound(structuredClone(schema) as Json, ranges), ranges };
}

function bound(node: Json, ranges: Map<string, RangeRule>): Json {
  if (node === null || typeof node !== "object" || Array.isArray(node)) return node;
  if (node.type === "integer" && !["enum", "const", "anyOf", "oneOf", "allOf"].some((k) => k in node)) {
    // One sentinel (and one set of rules) per distinct range: each automaton costs compile time.
    const [lo, hi] = [lowerBound(node), upperBound(node)];
    const sentinel = `__tessera_integer_${lo}_${hi}__`.replaceAll("-", "m");
    if (!ranges.has(sentinel)) ranges.set(sentinel, integerRange(lo, hi, `tessera_integer_${ranges.size}`));
    return { const: sentinel };
  }
  const recurse = (child: Json) => bound(child, ranges);
  for (const key of ONE) if (node[key] !== undefined) node[key] = recurse(node[key]);
  for (const key of LIST) if (Array.isArray(node[key])) node[key] = node[key].map(recurse);
  for (const key of MAP) {
    const map = node[key];
    if (map !== null && typeof map === "object" && !Array.isArray(map)) for (const k of Object.keys(map)) map[k] = recurse(map[k]!);
  }
  return node;
}

function lowerBound(node: { [key: string]: Json }): bigint {
  const inclusive = typeof node.minimum === "number" ? BigInt(Math.ceil(node.minimum)) : undefined;
  const exclusive = typeof node.exclusiveMinimum === "number" ? BigInt(Math.floor(node.exclusiveMinimum)) + 1n : undefined;
  if (inclusive === undefined && exclusive === undefined) return -BigInt(SAFE_INTEGER);
  return inclusive === undefined ? exclusive! : exclusive === undefined || inclusive > exclusive ? inclusive : exclusive;
}

function upperBound(node: { [key: string]: Json }): bigint {
  const inclusive = typeof node.maximum === "number" ? BigInt(Math.floor(node.maximum)) : undefined;
  const exclusive = typeof node.exclusiveMaximum === "number" ? BigInt(Math.ceil(node.exclusiveMaximum)) - 1n : undefined;
  if (inclusive === undefined && exclusive === undefined) return BigInt(SAFE_INTEGER);
  return inclusive === undefined ? exclusive! : exclusive === undefined || inclusive < exclusive ? inclusive : exclusive;
}

/** An integer range as EBNF: an expression, and the rules it names. */
export interface RangeRule {
  expr: string;
  rules: string[];
}

/** EBNF of the canonical JSON integers in [lo, hi] (no leading zeros, no `-0`); rules named `${name}_…`. */
export function integerRange(lo: bigint, hi: bigint, name: string): RangeRule {
  if (lo > hi) throw new Error(`an integer's minimum ${lo} is above its maximum ${hi}`);
  const alternatives: string[] = [];
  const rules: string[] = [];
  if (lo <= -1n) {
    const negative = positiveBetween(hi < -1n ? -hi : 1n, -lo, `${name}_n`);
    alternatives.push(`"-" ${negative.expr}`);
    rules.push(...negative.rules);
  }
  if (lo <= 0n && hi >= 0n) alternatives.push('"0"');
  if (hi >= 1n) {
    const positive = positiveBetween(lo > 1n ? lo : 1n, hi, `${name}_p`);
    alternatives.push(positive.expr);
    rules.push(...positive.rules);
  }
  return { expr: `(${alternatives.join(" | ")})`, rules };
}

/**
 * EBNF of the integers in [a, b], 1 ≤ a ≤ b, written without leading zeros: the minimal
 * deterministic automaton of their digit strings as right-linear rules (each state's digits
 * split into disjoint classes by next state). Alternatives of different lengths that share a
 * prefix (`[1-9] [0-9]{3} | [1-9] [0-9]{2}`) are not used: XGrammar's matcher accepts 10000
 * under that grammar.
 */
export function positiveBetween(a: bigint, b: bigint, name: string): RangeRule {
  const [la, lb] = [String(a).length, String(b).length];
  const bounds = new Map<number, [string, string]>();
  for (let L = la; L <= lb; L++) bounds.set(L, [L === la ? String(a) : `1${"0".repeat(L - 1)}`, L === lb ? String(b) : "9".repeat(L)]);
  // A state: the lengths still possible, each with how many digits are read and whether the
  // digits so far equal the lower / upper bound's prefix. Encoded "L,k,tl,th;…".
  type Item = [number, number, boolean, boolean];
  const key = (items: Item[]) => items.map((i) => i.join(",")).join(";");
  const states = new Map<string, { id: number; items: Item[] }>();
  const queue: Item[][] = [];
  const stateOf = (items: Item[]) => {
    const k = key(items);
    let found = states.get(k);
    if (found === undefined) {
      found = { id: states.size, items };
      states.set(k, found);
      queue.push(items);
    }
    return found.id;
  };
  stateOf([...bounds.keys()].map((L): Item => [L, 0, true, true]));
  const rules: string[] = [];
  while (queue.length > 0) {
    const items = queue.shift()!;
    const id = states.get(key(items))!.id;
    const byTarget = new Map<number, number[]>();
    for (let d = 0; d <= 9; d++) {
      const next: Item[] = [];
      for (const [L, k, tl, th] of items) {
        if (k === L) continue;
        const [lo, hi] = bounds.get(L)!;
        if ((k === 0 && d === 0) || (tl && d < Number(lo[k])) || (th && d > Number(hi[k]))) continue;
        next.push([L, k + 1, tl && d === Number(lo[k]), th && d === Number(hi[k])]);
      }
      if (next.length === 0) continue;
      const target = stateOf(next);
      byTarget.set(target, [...(byTarget.get(target) ?? []), d]);
    }
    const alternatives = [...byTarget].map(([target, digits]) => `${digitClass(digits)} ${name}_${target}`);
    if (items.some(([L, k]) => k === L)) alternatives.push('""');
    rules.push(`${name}_${id} ::= ${alternatives.join(" | ")}`);
  }
  return { expr: `${name}_0`, rules };
}

/** A character class of digits: `[0-4]`, `[135]`. */
function digitClass(digits: number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < digits.length; ) {
    let j = i;
    while (j + 1 < digits.length && digits[j + 1] === digits[j]! + 1) j++;
    runs.push(j > i ? `${digits[i]}-${digits[j]}` : `${digits[i]}`);
    i = j + 1;
  }
  return `[${runs.join("")}]`;
}

/** Swaps each sentinel's literal in converted EBNF for its integer range. */
export function withIntegerRanges(ebnf: string, ranges: Map<string, RangeRule>): string {
  let out = ebnf;
  for (const [sentinel, range] of ranges) out = out.split(`"\\"${sentinel}\\""`).join(range.expr);
  return [out, ...[...ranges.values()].flatMap((r) => r.rules)].join("\n");
}

const SAFE_RANGE = integerRange(-BigInt(SAFE_INTEGER), BigInt(SAFE_INTEGER), "tessera_safe_integer");
const EXPONENT = `[eE] [+-]? [0-9]{1,${EXPONENT_DIGITS}}`;
/**
 * A number without fraction or exponent is an integer to every JSON parser, so it is the safe
 * range (16 digits alone would let 9032222222221922 through); with either, the bounded form.
 */
export const BOUNDED_NUMBER =
  `${SAFE_RANGE.expr} | "-"? ("0" | [1-9] [0-9]{0,${INTEGER_PART_DIGITS - 1}}) ` +
  `(("." [0-9]{1,${FRACTION_DIGITS}}) (${EXPONENT})? | ${EXPONENT})`;

/**
 * Replaces the converter's unbounded `basic_integer` and `basic_number` rules with bounded ones,
 * and bounds the integer part of a number with one bound (XGrammar writes its other side
 * `( [1-9] | [1-9] [0-9]* )`) to 16 digits.
 */
export function withBoundedBasics(ebnf: string): string {
  let safeRange = false;
  const out = ebnf
    .split("( [1-9] | [1-9] [0-9]* )")
    .join(`( [1-9] [0-9]{0,${INTEGER_PART_DIGITS - 1}} )`)
    .replace(/^basic_integer ::= .*$/m, () => {
      safeRange = true;
      return `basic_integer ::= ${SAFE_RANGE.expr}`;
    })
    .replace(/^basic_number ::= .*$/m, () => {
      safeRange = true;
      return `basic_number ::= ${BOUNDED_NUMBER}`;
    });
  // The safe range's rules, once, for whichever of the two uses them.
  return safeRange ? [out, ...SAFE_RANGE.rules].join("\n") : out;
}
