import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { depthExceededAt, parseJsonText } from "./safe-json.js";

describe("depthExceededAt", () => {
  it("finds where nesting passes the limit, ignoring brackets inside strings", () => {
    expect(depthExceededAt("[[1]]", 2)).toBe(-1);
    expect(depthExceededAt("[[[1]]]", 2)).toBe(2);
    expect(depthExceededAt('{"a":{"b":[1]}}', 2)).toBe(10);
    expect(depthExceededAt('["[[[[", "\\"[[[["]', 1)).toBe(-1);
    expect(depthExceededAt('{"a\\\\":[[1]]}', 2)).toBe(8);
  });

  it("agrees with the real depth of any JSON value", () => {
    const depthOf = (v: unknown): number => (typeof v === "object" && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0);
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

describe("why the depth is checked before parsing", () => {
  it("JSON.parse takes any depth, JSON.stringify of the result overflows the stack", () => {
    const deep = JSON.parse("[".repeat(100_000) + "]".repeat(100_000)) as unknown;
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
  });

  it("Object.assign of parsed JSON swaps the target's prototype: user JSON is never copied that way", () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": 1}}') as object;
    expect((Object.assign({}, parsed) as { polluted?: number }).polluted).toBe(1);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });
});
