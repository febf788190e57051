import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { copyJson, defineOwn, depthExceededAt, ownValue, parseJsonText } from "./safe-json.js";

describe("depthExceededAt", () => {
  it("finds where nesting passes the limit, ignoring brackets inside strings", () => {
    expect(depthExceededAt("[[1]]", 2)).toBe(-1);
    expect(depthExceededAt("[[[1]]]", 2)).toBe(2);
    expect(depthExceededAt('{"a":{"b":[1]}}', 2)).toBe(10);
    expect(depthExceededAt('["[[[[", "\\"[[[["]', 1)).toBe(-1);
    expect(depthExceededAt('{"a\\\\":[[1]]}', 2)).toBe(8);
  });

  it("agrees with the real depth of any JSON value", () => {
    const depthOf = (v: unknown): number =>
      typeof v === "object" && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0;
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 0, max: 8 }), (value, limit) => {
        const exceeded = depthExceededAt(JSON.stringify(value), limit) >= 0;
        expect(exceeded).toBe(depthOf(value) > limit);
      }),
    );
  });

  it("scans a million levels without recursion", () => {
    const deep = "[".repeat(1_000_000) + "]".repeat(1_000_000);
    expect(depthExceededAt(deep, 128)).toBe(128);
  });
});

describe("parseJsonText", () => {
  it("parses, or says why not and where", () => {
    expect(parseJsonText('{"a":[1,2]}')).toEqual({ ok: true, value: { a: [1, 2] } });
    expect(parseJsonText('{"a": ')).toMatchObject({ ok: false, reason: "syntax", position: 6 });
    expect(parseJsonText("[".repeat(200) + "]".repeat(200))).toEqual({ ok: false, reason: "depth", position: 128, limit: 128 });
    expect(parseJsonText("[[[]]]", 2)).toMatchObject({ ok: false, reason: "depth", position: 2 });
  });

  it("keeps __proto__ as an own key and never changes a prototype", () => {
    const parsed = parseJsonText('{"__proto__": {"polluted": 1}, "a": {"constructor": {"prototype": {"polluted": 2}}}}');
    expect(parsed.ok).toBe(true);
    const value = (parsed as { value: Record<string, unknown> }).value;
    expect(Object.keys(value)).toEqual(["__proto__", "a"]);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });
});

describe("copying user JSON", () => {
  it("copies __proto__, constructor and prototype as data, leaving every prototype alone", () => {
    const source = JSON.parse('{"__proto__": {"polluted": 1}, "list": [{"__proto__": {"x": 1}}, null, 2.5], "constructor": {"prototype": {"y": 1}}}') as object;
    const copy = copyJson(source) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["__proto__", "list", "constructor"]);
    expect(Object.getOwnPropertyDescriptor(copy, "__proto__")!.value).toEqual({ polluted: 1 });
    expect((copy as { polluted?: number }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe(JSON.stringify(source));
    expect(copy["list"]).not.toBe((source as Record<string, unknown>)["list"]);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
    // Object.assign, by contrast, swaps the prototype of its target:
    expect((Object.assign({}, source) as { polluted?: number }).polluted).toBe(1);
  });

  it("round-trips any JSON value exactly", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.stringify(copyJson(value))).toBe(JSON.stringify(value));
      }),
    );
  });

  it("copies nesting far deeper than the stack allows recursion", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    let copy = copyJson(deep);
    for (let i = 0; i < 100_000; i++) copy = (copy as unknown[])[0];
    expect(copy).toBe(1);
  });

  it("writes and reads own properties only", () => {
    const target: Record<string, number> = {};
    defineOwn(target, "__proto__", 1);
    expect(Object.getPrototypeOf(target)).toBe(Object.prototype);
    expect(ownValue(target, "__proto__")).toBe(1);
    expect(ownValue({}, "constructor")).toBeUndefined();
    expect(ownValue({}, "toString")).toBeUndefined();
  });
});
