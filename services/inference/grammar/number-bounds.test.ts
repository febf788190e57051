// The number bounds (number-bounds.ts) against a brute-force reference: XGrammar's acceptance of
// a number's text under the bounded grammar equals what the reference says (canonical JSON,
// within the bounds, the schema's own bounds winning).
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SPECIAL_TOKENS } from "../core/model-config.js";
import { grammarSource } from "./grammar-spec.js";
import { positiveBetween, SAFE_INTEGER } from "./number-bounds.js";
import { loadXGrammar, type XGrammar } from "./xgrammar.js";

let xg: XGrammar;
beforeAll(async () => {
  xg = await loadXGrammar();
});

async function accepts(ebnf: string, text: string): Promise<boolean> {
  const grammar = await xg.Grammar.fromEBNF(ebnf);
  try {
    return await xg.Testings.isGrammarAcceptString(grammar, text);
  } finally {
    grammar.dispose();
  }
}

async function schemaEbnf(schema: object, numberBounds = true): Promise<string> {
  const source = await grammarSource(
    { kind: "json_schema", schema },
    (...args) => xg.Testings._jsonSchemaToEBNF(...args),
    DEFAULT_SPECIAL_TOKENS,
    numberBounds,
  );
  return (source as { ebnf: string }).ebnf;
}

const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]*)$/;
const B = BigInt(SAFE_INTEGER);

/** Integer texts near interesting places: small, near the bounds, near 2^53, leading zeros, long. */
const integerText = (around: bigint[]) =>
  fc.oneof(
    fc.bigInt({ min: -(10n ** 18n), max: 10n ** 18n }).map(String),
    fc.tuple(fc.constantFrom(...around), fc.integer({ min: -3, max: 3 })).map(([a, d]) => String(a + BigInt(d))),
    fc.stringMatching(/^-?0[0-9]{1,3}$/),
    fc.stringMatching(/^[1-9][0-9]{15,18}$/),
    fc.constantFrom("-0", "0", "-", ""),
  );

describe("number bounds", () => {
  it("positiveBetween(a, b) accepts exactly a..b written without leading zeros", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.bigInt({ min: 1n, max: B }),
        fc.bigInt({ min: 1n, max: B }),
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 17n }), { maxLength: 6 }),
        async (x, y, xs) => {
          const [a, n] = x <= y ? [x, y] : [y, x];
          const range = positiveBetween(a, n, "r");
          const ebnf = [`root ::= ${range.expr}`, ...range.rules].join("\n");
          for (const v of [...xs, a, a - 1n, a + 1n, n, n + 1n, n - 1n, 1n, 0n]) {
            const text = String(v);
            expect(await accepts(ebnf, text), `${text} in [${a}, ${n}]`).toBe(v >= a && v <= n);
          }
          expect(await accepts(ebnf, `0${n}`)).toBe(false);
        },
      ),
      { numRuns: 30, seed: 21 },
    );
  });

  it("an integer schema accepts canonical integers within its bounds, ±(2^53 − 1) where it gives none", async () => {
    const bound = fc.option(fc.bigInt({ min: -(10n ** 15n), max: 10n ** 15n }), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(
        bound,
        bound,
        fc.array(integerText([0n, B, -B, 10n ** 15n]), { minLength: 8, maxLength: 8 }),
        async (a, b, texts) => {
          const [lo, hi] = a !== undefined && b !== undefined && a > b ? [b, a] : [a, b];
          const schema = {
            type: "integer",
            ...(lo !== undefined ? { minimum: Number(lo) } : {}),
            ...(hi !== undefined ? { maximum: Number(hi) } : {}),
          };
          const ebnf = await schemaEbnf(schema);
          for (const text of [...texts, ...[lo, hi].filter((x) => x !== undefined).map(String)]) {
            const want = CANONICAL_INTEGER.test(text) && BigInt(text) >= (lo ?? -B) && BigInt(text) <= (hi ?? B);
            expect(await accepts(ebnf, text), `${text} under ${JSON.stringify(schema)}`).toBe(want);
          }
        },
      ),
      { numRuns: 20, seed: 22 },
    );
  });

  it("fields share the rules of equal ranges and keep their own bounds", async () => {
    const int = (extra: object) => ({ type: "integer", ...extra });
    const properties = {
      a: int({}),
      b: int({ minimum: 1, maximum: 5 }),
      c: int({}),
      d: int({ minimum: 1, maximum: 5 }),
      e: int({ maximum: -3 }),
    };
    const ebnf = await schemaEbnf({ type: "object", properties, required: Object.keys(properties), additionalProperties: false });
    const text = (a: string, b: string, c: string, d: string, e: string) => `{"a": ${a}, "b": ${b}, "c": ${c}, "d": ${d}, "e": ${e}}`;
    expect(await accepts(ebnf, text("9007199254740991", "5", "-12", "1", "-3"))).toBe(true);
    expect(await accepts(ebnf, text("1", "6", "1", "1", "-3"))).toBe(false);
    expect(await accepts(ebnf, text("1", "1", "1", "0", "-3"))).toBe(false);
    expect(await accepts(ebnf, text("1", "1", "9007199254740992", "1", "-3"))).toBe(false);
    expect(await accepts(ebnf, text("1", "1", "1", "1", "-2"))).toBe(false);
    expect((ebnf.match(/^tessera_integer_\d+_p_0 ::=/gm) ?? []).length).toBe(2);
  });

  it("the schema's own bounds win over the defaults", async () => {
    const ebnf = await schemaEbnf({ type: "integer", minimum: 0, maximum: 1e18 });
    expect(await accepts(ebnf, "123456789012345678")).toBe(true);
    expect(await accepts(ebnf, "1234567890123456789")).toBe(false);
  });

  it("numbers under type lists and json_object: integers within ±(2^53 − 1), else 16 integer digits, 15 fraction digits, 2 exponent digits", async () => {
    const form = /^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?([eE][+-]?[0-9]{1,2})?$/;
    const reference = {
      test: (text: string) =>
        form.test(text) && (/[.eE]/.test(text) || (CANONICAL_INTEGER.test(text) && BigInt(text) <= B && BigInt(text) >= -B)),
    };
    const ebnf = await schemaEbnf({ type: ["number", "null"] });
    const numberText = fc
      .tuple(
        fc.constantFrom("", "-"),
        fc.oneof(fc.constant("0"), fc.stringMatching(/^[1-9][0-9]{0,17}$/), fc.stringMatching(/^0[0-9]$/)),
        fc.option(fc.stringMatching(/^\.[0-9]{0,17}$/), { nil: "" }),
        fc.option(fc.stringMatching(/^[eE][+-]?[0-9]{0,3}$/), { nil: "" }),
      )
      .map((parts) => parts.join(""));
    await fc.assert(
      fc.asyncProperty(fc.array(numberText, { minLength: 10, maxLength: 10 }), async (texts) => {
        for (const text of texts) expect(await accepts(ebnf, text), text).toBe(reference.test(text));
      }),
      { numRuns: 15, seed: 23 },
    );
    const object = await grammarSource(
      { kind: "json_object" },
      (...args) => xg.Testings._jsonSchemaToEBNF(...args),
      DEFAULT_SPECIAL_TOKENS,
    );
    const objectEbnf = (object as { ebnf: string }).ebnf;
    expect(await accepts(objectEbnf, '{"a": 9007199254740991}')).toBe(true);
    expect(await accepts(objectEbnf, `{"a": 1${"1".repeat(16)}}`)).toBe(false);
    // 16 digits past 2^53 (the bundled model's answer to "Reply in JSON: what is 2+2?" before).
    expect(await accepts(objectEbnf, '{"a": 9032222222221922}')).toBe(false);
    expect(await accepts(objectEbnf, '{"a": -9007199254740992}')).toBe(false);
    expect(await accepts(objectEbnf, '{"a": 9032222222221922.5, "b": 90322222222219e2}')).toBe(true);
  });

  it("off: the converter's unbounded rules, as before", async () => {
    const ebnf = await schemaEbnf({ type: "integer" }, false);
    expect(await accepts(ebnf, "1".repeat(40))).toBe(true);
    expect(await accepts(await schemaEbnf({ type: "integer" }), "1".repeat(17))).toBe(false);
  });
});
