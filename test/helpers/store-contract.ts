import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { casUpdate, CasRetriesExhaustedError } from "../../lib/store/cas.js";
import { InvalidKeyError, RevisionConflictError, type KvBucket, type Store } from "../../lib/store/types.js";

export interface StoreContractContext {
  /** The time source the store must use for entry expiry, when it can take one. */
  clock: () => number;
}

export interface StoreContractOptions {
  /**
   * "injected" (default): the store reads time from `ctx.clock` and the expiry tests move
   * that clock. "real": the backend expires entries by wall time (NATS KV), so the expiry
   * tests wait instead.
   */
  ttlClock?: "injected" | "real";
}

/**
 * The behaviour every Store adapter must have. Each adapter's test file calls this with a
 * factory that returns a fresh, empty store.
 */
export function runStoreContract(
  name: string,
  makeStore: (ctx: StoreContractContext) => Store | Promise<Store>,
  options: StoreContractOptions = {},
): void {
  describe(`Store contract: ${name}`, () => {
    let now = 1_700_000_000_000;
    let store: Store;
    let bucket: KvBucket<{ n: number; tag?: string }>;

    beforeEach(async () => {
      now = 1_700_000_000_000;
      store = await makeStore({ clock: () => now });
      bucket = store.bucket("contract");
    });
    afterEach(async () => {
      await store.close();
    });

    it("creates a key once; a second create conflicts", async () => {
      const revision = await bucket.create("a.one", { n: 1 });
      expect(revision).toBeGreaterThan(0);
      expect(await bucket.get("a.one")).toEqual({ value: { n: 1 }, revision });
      const err = await bucket.create("a.one", { n: 2 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RevisionConflictError);
      expect(await bucket.get("a.one")).toEqual({ value: { n: 1 }, revision });
    });

    it("returns null for a missing key", async () => {
      expect(await bucket.get("missing")).toBeNull();
    });

    it("updates only at the expected revision", async () => {
      const r1 = await bucket.create("k", { n: 1 });
      const r2 = await bucket.update("k", { n: 2 }, r1);
      expect(r2).not.toBe(r1);
      await expect(bucket.update("k", { n: 3 }, r1)).rejects.toBeInstanceOf(RevisionConflictError);
      expect(await bucket.get("k")).toEqual({ value: { n: 2 }, revision: r2 });
      await expect(bucket.update("absent", { n: 1 }, r2)).rejects.toBeInstanceOf(RevisionConflictError);
      expect(await bucket.get("absent")).toBeNull();
    });

    it("lets exactly one of two writers at the same revision win", async () => {
      const r1 = await bucket.create("race", { n: 0 });
      const results = await Promise.allSettled([
        bucket.update("race", { n: 1, tag: "x" }, r1),
        bucket.update("race", { n: 1, tag: "y" }, r1),
      ]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(RevisionConflictError);
    });

    it("puts unconditionally", async () => {
      const r1 = await bucket.put("p", { n: 1 });
      const r2 = await bucket.put("p", { n: 2 });
      expect(r2).not.toBe(r1);
      expect(await bucket.get("p")).toEqual({ value: { n: 2 }, revision: r2 });
    });

    it("deletes, conditionally or not", async () => {
      const r1 = await bucket.create("d", { n: 1 });
      await expect(bucket.delete("d", r1 + 12345)).rejects.toBeInstanceOf(RevisionConflictError);
      expect(await bucket.get("d")).not.toBeNull();
      await bucket.delete("d", r1);
      expect(await bucket.get("d")).toBeNull();
      await expect(bucket.delete("d", r1)).rejects.toBeInstanceOf(RevisionConflictError);
      await bucket.delete("d"); // missing, unconditional: no error
      await bucket.create("e", { n: 1 });
      await bucket.delete("e");
      expect(await bucket.get("e")).toBeNull();
    });

    it("never reuses a revision after delete and re-create", async () => {
      const seen = new Set<number>();
      for (let i = 0; i < 5; i++) {
        const r = await bucket.create("again", { n: i });
        expect(seen.has(r)).toBe(false);
        seen.add(r);
        await bucket.delete("again");
      }
      const r = await bucket.create("again", { n: 9 });
      await bucket.delete("again");
      await bucket.create("again", { n: 10 });
      await expect(bucket.update("again", { n: 11 }, r)).rejects.toBeInstanceOf(RevisionConflictError);
    });

    it("hands out copies, not the stored value", async () => {
      const value = { n: 1 };
      await bucket.create("copy", value);
      value.n = 99;
      const read = await bucket.get("copy");
      read!.value.n = 42;
      expect((await bucket.get("copy"))!.value).toEqual({ n: 1 });
    });

    it("lists keys by prefix", async () => {
      for (const key of ["acct.a", "acct.b", "acct.c.d", "acctx", "key.a", "z"]) await bucket.put(key, { n: 0 });
      const list = async (prefix?: string) => {
        const keys: string[] = [];
        for await (const key of bucket.keys(prefix)) keys.push(key);
        return keys.sort();
      };
      expect(await list("acct.")).toEqual(["acct.a", "acct.b", "acct.c.d"]);
      expect(await list("acct")).toEqual(["acct.a", "acct.b", "acct.c.d", "acctx"]);
      expect(await list("nothing.")).toEqual([]);
      expect(await list()).toEqual(["acct.a", "acct.b", "acct.c.d", "acctx", "key.a", "z"]);
      await bucket.delete("acct.b");
      expect(await list("acct.")).toEqual(["acct.a", "acct.c.d"]);
    });

    it("refuses keys and bucket names that NATS KV would refuse", async () => {
      for (const key of ["", "a b", ".a", "a.", "ключ", "a*", "a>", "a\nb"]) {
        await expect(bucket.get(key), key).rejects.toBeInstanceOf(InvalidKeyError);
        await expect(bucket.put(key, { n: 1 }), key).rejects.toBeInstanceOf(InvalidKeyError);
      }
      for (const key of ["a-b", "a/b", "a_b", "a=b", "A.b.C", "0"]) await bucket.put(key, { n: 1 });
      expect(() => store.bucket("bad.name")).toThrow(InvalidKeyError);
      expect(() => store.bucket("")).toThrow(InvalidKeyError);
    });

    it("keeps buckets apart and gives the same bucket for the same name", async () => {
      const other = store.bucket<{ n: number }>("contract-other");
      await bucket.create("shared", { n: 1 });
      expect(await other.get("shared")).toBeNull();
      await other.create("shared", { n: 2 });
      expect((await store.bucket<{ n: number }>("contract").get("shared"))!.value).toEqual({ n: 1 });
    });

    it("expires entries of a TTL bucket after their last write", async () => {
      const ttlMs = options.ttlClock === "real" ? 1500 : 60_000;
      const advance = async (ms: number) => {
        if (options.ttlClock === "real") await new Promise((resolve) => setTimeout(resolve, ms));
        else now += ms;
      };
      const ttl = store.bucket<{ n: number }>("contract-ttl", { ttlMs });
      await ttl.create("old", { n: 1 });
      await advance(ttlMs * 0.6);
      const fresh = await ttl.create("fresh", { n: 2 });
      await advance(ttlMs * 0.6);
      expect(await ttl.get("old")).toBeNull();
      expect((await ttl.get("fresh"))!.value).toEqual({ n: 2 });
      const keys: string[] = [];
      for await (const key of ttl.keys()) keys.push(key);
      expect(keys).toEqual(["fresh"]);
      // An expired key can be created again; updating it at its old revision fails.
      await ttl.create("old", { n: 3 });
      expect((await ttl.get("old"))!.value).toEqual({ n: 3 });
      await advance(ttlMs * 0.6);
      await expect(ttl.update("fresh", { n: 4 }, fresh)).rejects.toBeInstanceOf(RevisionConflictError);
    });

    describe("casUpdate", () => {
      it("creates, then updates, and skips the write when fn returns undefined", async () => {
        const first = await casUpdate(bucket, "c", (v) => ({ n: (v?.n ?? 0) + 1 }));
        expect(first).toMatchObject({ value: { n: 1 }, changed: true });
        const second = await casUpdate(bucket, "c", (v) => ({ n: v!.n + 1 }));
        expect(second.value).toEqual({ n: 2 });
        const skipped = await casUpdate(bucket, "c", () => undefined);
        expect(skipped).toEqual({ value: { n: 2 }, revision: second.revision, changed: false });
        expect(await casUpdate(bucket, "none", () => undefined)).toEqual({
          value: undefined,
          revision: null,
          changed: false,
        });
      });

      it("writes nothing when fn throws", async () => {
        await bucket.create("t", { n: 1 });
        await expect(
          casUpdate(bucket, "t", () => {
            throw new Error("no");
          }),
        ).rejects.toThrow("no");
        expect((await bucket.get("t"))!.value).toEqual({ n: 1 });
      });

      it("ends exactly at N after N parallel increments", async () => {
        const n = 100;
        await Promise.all(Array.from({ length: n }, () => casUpdate(bucket, "counter", (v) => ({ n: (v?.n ?? 0) + 1 }))));
        expect((await bucket.get("counter"))!.value.n).toBe(n);
      });

      it("retries when another writer wins in between", async () => {
        await bucket.create("contended", { n: 0 });
        // A writer outside this process: it bumps the key between our read and our write.
        let interference = 3;
        const meddling = withGet(bucket, async (key) => {
          const entry = await bucket.get(key);
          if (interference-- > 0) await bucket.put(key, { n: entry!.value.n + 10 });
          return entry;
        });
        let calls = 0;
        const result = await casUpdate(meddling, "contended", (v) => {
          calls++;
          return { n: v!.n + 1 };
        });
        expect(calls).toBe(4);
        expect(result.value).toEqual({ n: 31 });
        expect((await bucket.get("contended"))!.value).toEqual({ n: 31 });
      });

      it("gives up after maxRetries conflicts", async () => {
        await bucket.create("hopeless", { n: 0 });
        const alwaysStale = withGet(bucket, async (key) => {
          const entry = await bucket.get(key);
          await bucket.put(key, { n: entry!.value.n + 1 });
          return entry;
        });
        await expect(casUpdate(alwaysStale, "hopeless", (v) => v, { maxRetries: 3 })).rejects.toBeInstanceOf(CasRetriesExhaustedError);
      });
    });
  });
}

/** The bucket with its `get` replaced: stands in for a writer in another process. */
function withGet<T>(bucket: KvBucket<T>, get: KvBucket<T>["get"]): KvBucket<T> {
  return {
    name: bucket.name,
    get,
    create: (key, value) => bucket.create(key, value),
    update: (key, value, revision) => bucket.update(key, value, revision),
    put: (key, value) => bucket.put(key, value),
    delete: (key, revision) => bucket.delete(key, revision),
    keys: (prefix) => bucket.keys(prefix),
  };
}
