// Child process of lmdb.test.ts: increments one counter N times through casUpdate on a
// shared LMDB directory, racing the parent and its siblings.
import { casUpdate } from "../cas.js";
import { openLmdbStore } from "../lmdb.js";

const [path, times] = process.argv.slice(2);
const store = openLmdbStore({ path: path! });
const bucket = store.bucket<{ n: number }>("shared");
await Promise.all(Array.from({ length: Number(times) }, () => casUpdate(bucket, "counter", (v) => ({ n: (v?.n ?? 0) + 1 }))));
await store.close();
