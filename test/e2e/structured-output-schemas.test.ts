// Generated JSON schemas (fast-check) against the tiny test model over HTTP: every reply,
// decoded under its schema's grammar, parses and validates (ajv). Strings and arrays are
// bounded: the tiny model's random weights rarely close a string, and an unbounded one would
// run to max_tokens (finish_reason "length", a valid prefix only; docs/constrained-decoding.md).
import { Ajv } from "ajv";
import fc from "fast-check";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_DEFAULT_RPM: "100000" } });
  client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

type Schema = Record<string, unknown>;
const name = fc.stringMatching(/^[a-z][a-z_]{0,9}$/);

const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.record({ type: fc.constant("string"), maxLength: fc.integer({ min: 1, max: 16 }) }),
  fc
    .tuple(fc.integer({ min: 0, max: 8 }), fc.integer({ min: 8, max: 24 }))
    .map(([min, max]) => ({ type: "string", minLength: min, maxLength: max })),
  fc.constant({ type: "integer" }),
  fc
    .tuple(fc.integer({ min: -50, max: 50 }), fc.integer({ min: 0, max: 500 }))
    .map(([min, span]) => ({ type: "integer", minimum: min, maximum: min + span })),
  fc.constant({ type: "number" }),
  fc.constant({ type: "boolean" }),
  fc.constant({ type: "null" }),
  fc.uniqueArray(fc.stringMatching(/^[a-z ]{1,8}$/), { minLength: 1, maxLength: 4 }).map((values) => ({ enum: values })),
  fc.constant({ type: ["string", "null"], maxLength: 10 }),
  fc.constant({ const: "fixed" }),
  fc.constant({ type: "string", pattern: "^[a-z]{2,6}$" }),
);

const schemaArb: fc.Arbitrary<Schema> = fc.letrec<{ node: Schema; object: Schema }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.record({ type: fc.constant("array"), items: tie("node"), maxItems: fc.integer({ min: 0, max: 3 }) }),
    fc.tuple(leaf, leaf).map(([a, b]) => ({ anyOf: [a, b] })),
    tie("object"),
  ),
  object: fc
    .dictionary(name, tie("node"), { minKeys: 1, maxKeys: 4 })
    .chain((properties) =>
      fc.record({
        type: fc.constant("object"),
        properties: fc.constant(properties),
        required: fc.subarray(Object.keys(properties)),
        additionalProperties: fc.boolean().map((closed) => (closed ? false : undefined)),
      }),
    )
    .map((s) => JSON.parse(JSON.stringify(s)) as Schema),
})).object;

describe("generated JSON schemas", () => {
  it("every reply parses and validates against its schema", async () => {
    const ajv = new Ajv({ strict: false });
    await fc.assert(
      fc.asyncProperty(schemaArb, fc.constantFrom("Fill the form.", "Describe a cat.", "Any data."), async (schema, question) => {
        const completion = await client.chat.completions.create({
          model: "textmodel-26b",
          messages: [{ role: "user", content: question }],
          response_format: { type: "json_schema", json_schema: { name: "generated", schema } },
        });
        const choice = completion.choices[0]!;
        expect(choice.finish_reason).toBe("stop");
        const value = JSON.parse(choice.message.content!);
        const validate = ajv.compile(schema);
        expect(validate(value), `${JSON.stringify(validate.errors)} for ${choice.message.content}`).toBe(true);
      }),
      { numRuns: 30, seed: 1313 },
    );
  });
});
