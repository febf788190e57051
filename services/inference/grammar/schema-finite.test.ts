// Schemas with no finite value (issue 27, item 1): found by checkSchema before any compile.
import { describe, expect, it } from "vitest";
import { checkSchema } from "./schema-check.js";

const where = "response_format.json_schema.schema";
const refused = (schema: unknown) => expect(() => checkSchema(schema, where));

describe("schemas without a finite value", () => {
  it("refuses a $ref cycle where every branch is required, naming where", () => {
    const selfRef = { type: "object", properties: { c: { $ref: "#" } }, required: ["c"], additionalProperties: false };
    refused(selfRef).toThrow(/^response_format\.json_schema\.schema has no finite value/);
    refused({ properties: { c: { $ref: "#" } }, required: ["c"] }).toThrow(/has no finite value/);
    const viaDefs = {
      type: "object",
      properties: { a: { $ref: "#/$defs/node" } },
      $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } }, required: ["next"] } },
    };
    refused(viaDefs).toThrow(/schema\.properties\.a has no finite value/);
    const viaItems = { type: "array", items: { $ref: "#" }, minItems: 1 };
    refused(viaItems).toThrow(/has no finite value/);
    const everyBranch = { anyOf: [{ $ref: "#/$defs/a" }], $defs: { a: { type: "array", prefixItems: [{ $ref: "#" }], minItems: 1 } } };
    refused(everyBranch).toThrow(/has no finite value/);
  });

  it("accepts recursion that can end: an optional branch, an empty array, a leaf in anyOf or the type list", () => {
    const tree = {
      type: "object",
      properties: { value: { type: "integer" }, children: { type: "array", items: { $ref: "#" } } },
      required: ["value", "children"],
      additionalProperties: false,
    };
    expect(() => checkSchema(tree, where)).not.toThrow();
    expect(() => checkSchema({ type: "object", properties: { c: { $ref: "#" } } }, where)).not.toThrow();
    const leaf = { anyOf: [{ type: "null" }, { type: "object", properties: { c: { $ref: "#" } }, required: ["c"] }] };
    expect(() => checkSchema(leaf, where)).not.toThrow();
    expect(() => checkSchema({ type: ["object", "null"], properties: { c: { $ref: "#" } }, required: ["c"] }, where)).not.toThrow();
    expect(() => checkSchema({ type: "object", properties: { c: { $ref: "#" } }, required: ["c"], enum: [null] }, where)).not.toThrow();
  });
});
