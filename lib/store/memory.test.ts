import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runStoreContract } from "../../test/helpers/store-contract.js";
import { copyJson, createMemoryStore, updatesNow } from "./memory.js";
import type { KvBucket } from "./types.js";

runStoreContract("memory", ({ clock }) => createMemoryStore({ clock }));

/** What a serialising backend hands back for `value`. */
const roundTrip = (value: unknown): unknown => {
  const json = JSON.stringify(value);
  return json === undefined ? undefined : JSON.parse(json);
};

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

describe("copyJson", () => {
  it("gives what a JSON round trip gives, for any value", () => {
    const odd = fc.constantFrom<unknown>(
      undefined,
      NaN,
      -0,
      Infinity,
      new Date(0),
      new Point(1, 2),
      { toJSON: () => "tj" },
      () => 1,
      Symbol("s"),
    );
    const value = fc.letrec((tie) => ({
      any: fc.oneof({ depthSize: "small" }, fc.jsonValue(), odd, tie("array"), tie("object")),
      array: fc.array(tie("any"), { maxLength: 4 }),
      object: fc.dictionary(fc.oneof(fc.string(), fc.constant("__proto__")), tie("any"), { maxKeys: 4 }),
    })).any;
    fc.assert(
      fc.property(value, (v) => {
        expect(copyJson(v)).toStrictEqual(roundTrip(v));
      }),
    );
  });

  it("copies: changing the copy leaves the original as it was", () => {
    const original = { a: [1, { b: "c" }], d: { e: null } };
    const copy = copyJson(original) as typeof original;
    expect(copy).toEqual(original);
    (copy.a[1] as { b: string }).b = "changed";
    copy.d.e = 1 as never;
    expect(original).toEqual({ a: [1, { b: "c" }], d: { e: null } });
  });

  it("refuses what JSON refuses", () => {
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    expect(() => copyJson(cycle)).toThrow(TypeError);
    expect(() => copyJson({ n: 1n })).toThrow(TypeError);
  });
});

describe("updateNow (memory buckets)", () => {
  const bucket = () => createMemoryStore().bucket<{ n: number }>("now");

  it("reads a copy, writes the result and bumps the revision", async () => {
    const b = bucket();
    if (!updatesNow(b)) throw new Error("a memory bucket updates at once");
    let seen: unknown = "not called";
    const created = b.updateNow("k", (current) => {
      seen = current;
      return { n: 1 };
    });
    expect(seen).toBeUndefined();
    expect(created.changed).toBe(true);
    expect(await b.get("k")).toEqual({ value: { n: 1 }, revision: created.revision });

    const updated = b.updateNow("k", (current) => {
      current!.n = 100; // a copy: this changes nothing stored
      return { n: 2 };
    });
    expect(updated.revision).not.toBe(created.revision);
    expect((await b.get("k"))!.value).toEqual({ n: 2 });
  });

  it("writes nothing when fn returns undefined or throws", async () => {
    const b = bucket();
    if (!updatesNow(b)) throw new Error("a memory bucket updates at once");
    const revision = await b.create("k", { n: 1 });
    expect(b.updateNow("k", () => undefined)).toEqual({ revision, changed: false });
    expect(() =>
      b.updateNow("k", () => {
        throw new Error("no");
      }),
    ).toThrow("no");
    expect(await b.get("k")).toEqual({ value: { n: 1 }, revision });
    expect(b.updateNow("missing", () => undefined)).toEqual({ revision: null, changed: false });
  });

  it("replaceNow shows the stored value without copying and keeps the new one as it is", async () => {
    const b = bucket();
    if (!updatesNow(b)) throw new Error("a memory bucket updates at once");
    const first = { n: 1 };
    const created = b.replaceNow("k", (current) => {
      expect(current).toBeUndefined();
      return first;
    });
    expect(created.changed).toBe(true);
    let seen: unknown;
    const updated = b.replaceNow("k", (current) => {
      seen = current;
      return { n: current!.n + 1 };
    });
    expect(seen).toBe(first); // the stored object itself
    expect(updated.revision).toBeGreaterThan(created.revision!);
    expect(await b.get("k")).toEqual({ value: { n: 2 }, revision: updated.revision });
    expect(b.replaceNow("k", () => undefined)).toEqual({ revision: updated.revision, changed: false });
    // Readers still get copies.
    const read = (await b.get("k"))!.value;
    read.n = 100;
    expect((await b.get("k"))!.value).toEqual({ n: 2 });
  });

  it("keeps expiring entries in write order when updated in place", async () => {
    let now = 0;
    const b = createMemoryStore({ clock: () => now }).bucket<{ n: number }>("ttl", { ttlMs: 100 });
    if (!updatesNow(b)) throw new Error("a memory bucket updates at once");
    b.updateNow("a", () => ({ n: 1 }));
    now = 50;
    b.updateNow("b", () => ({ n: 1 }));
    now = 90;
    b.replaceNow("a", (current) => ({ n: current!.n + 1 })); // rewritten: lives until 190
    now = 160;
    expect(await b.get("b")).toBeNull();
    expect(await b.get("a")).toEqual({ value: { n: 2 }, revision: expect.any(Number) });
    expect([...(await collect(b.keys()))]).toEqual(["a"]);
  });

  it("is offered by memory buckets only", () => {
    const b = bucket();
    const wrapped: KvBucket<{ n: number }> = {
      name: b.name,
      get: (k) => b.get(k),
      create: (k, v) => b.create(k, v),
      update: (k, v, r) => b.update(k, v, r),
      put: (k, v) => b.put(k, v),
      delete: (k, r) => b.delete(k, r),
      keys: (p) => b.keys(p),
    };
    expect(updatesNow(b)).toBe(true);
    expect(updatesNow(wrapped)).toBe(false);
  });
});

async function collect(keys: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of keys) out.push(key);
  return out;
}
