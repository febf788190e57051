import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { casUpdate } from "./cas.js";
import { runStoreContract } from "../../test/helpers/store-contract.js";
import { openLmdbStore } from "./lmdb.js";

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "tessera-lmdb-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

runStoreContract("lmdb", ({ clock }) => openLmdbStore({ path: join(freshDir(), "db"), clock }));

describe("lmdb store", () => {
  it("keeps data across close and reopen", async () => {
    const path = join(freshDir(), "data.dir");
    const first = openLmdbStore({ path });
    const revision = await first.bucket<{ n: number }>("b").create("k", { n: 7 });
    await first.close();
    const second = openLmdbStore({ path });
    expect(await second.bucket<{ n: number }>("b").get("k")).toEqual({ value: { n: 7 }, revision });
    await second.close();
  });

  it("removes expired entries of a TTL bucket in the background", async () => {
    let now = 0;
    const store = openLmdbStore({ path: freshDir(), clock: () => now, sweepIntervalMs: 20 });
    const bucket = store.bucket<number>("ttl", { ttlMs: 1000 });
    for (let i = 0; i < 5000; i++) void bucket.put(`k${i}`, i);
    await bucket.put("last", 1);
    now = 1500;
    await bucket.put("fresh", 2);
    // With the clock set back to when the entries were written, every entry still stored is
    // visible: the count is what the sweep has left in the file.
    const storedCount = async () => {
      const saved = now;
      now = 0;
      let n = 0;
      for await (const _ of bucket.keys()) n++;
      now = saved;
      return n;
    };
    await expect.poll(storedCount, { timeout: 5000 }).toBe(1);
    await store.close();
  });

  it("refuses a second open of the same directory in one process (LMDB deadlocks on it)", async () => {
    const path = freshDir();
    const store = openLmdbStore({ path });
    expect(() => openLmdbStore({ path: join(path, ".") })).toThrow(/already open in this process/);
    await store.close();
    const again = openLmdbStore({ path });
    await again.close();
  });

  it("stays exact when several processes increment one key", async () => {
    const path = freshDir();
    const store = openLmdbStore({ path });
    const bucket = store.bucket<{ n: number }>("shared");
    const child = fileURLToPath(new URL("./testdata/lmdb-increment.ts", import.meta.url));
    const runChild = () =>
      new Promise<void>((resolve, reject) => {
        const proc = spawn(process.execPath, ["--import", "tsx", child, path, "150"], { stdio: "inherit" });
        proc.on("error", reject);
        proc.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}`))));
      });
    const mine = async () => {
      for (let i = 0; i < 150; i++) await casUpdate(bucket, "counter", (v) => ({ n: (v?.n ?? 0) + 1 }));
    };
    await Promise.all([runChild(), runChild(), mine()]);
    expect((await bucket.get("counter"))!.value.n).toBe(450);
    await store.close();
  });
});

describe("lmdb store files", () => {
  it("are readable by their owner only: the directory 0700, its files 0600, also when it existed before", async () => {
    const parent = freshDir();
    const path = join(parent, "accounting");
    const store = openLmdbStore({ path });
    await store.bucket<number>("b").put("k", 1);
    await store.close();
    const mode = (p: string) => statSync(p).mode & 0o777;
    expect(mode(path)).toBe(0o700);
    const files = readdirSync(path);
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(mode(join(path, file)), file).toBe(0o600);
    // A store left world-readable by an earlier version is narrowed when it opens.
    chmodSync(path, 0o755);
    for (const file of files) chmodSync(join(path, file), 0o644);
    const again = openLmdbStore({ path });
    await again.close();
    expect(mode(path)).toBe(0o700);
    for (const file of readdirSync(path)) expect(mode(join(path, file)), file).toBe(0o600);
  });
});
