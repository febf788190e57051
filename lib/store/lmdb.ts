import { chmodSync, mkdirSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { open, type Database, type RootDatabase } from "lmdb";
import {
  assertValidBucketName,
  assertValidKey,
  assertValidPrefix,
  assertValidTtl,
  RevisionConflictError,
  type BucketOptions,
  type KvBucket,
  type KvEntry,
  type Store,
} from "./types.js";

export interface LmdbStoreOptions {
  /** Directory of the LMDB environment (created if missing); it is made 0700 and its files 0600. */
  path: string;
  /** Time source for entry expiry (ms since the epoch). */
  clock?: () => number;
  /** How often expired entries of TTL buckets are removed (default: min(ttl, 10 min)). */
  sweepIntervalMs?: number;
}

/** What one LMDB entry holds: the value and when it was written (for TTL buckets). */
interface Stored {
  v: unknown;
  t: number;
}

// Directories this process has open. LMDB must not open one environment twice in a process:
// the second handle's write transactions can deadlock against the first's writer thread.
const openInThisProcess = new Set<string>();

const KEY_END = "\x7f"; // sorts after every character a key may contain
const SWEEP_CHUNK = 2000;

/**
 * The durable store of embedded mode: one LMDB environment, one named database per bucket.
 *
 * Compare-and-set uses LMDB entry versions: conditional writes are checked inside the write
 * transaction, so they are atomic also across processes sharing the files (the server and
 * the admin CLI). Writes go through lmdb-js's batched asynchronous transactions, which
 * commit many concurrent writes together.
 *
 * Revisions are microseconds since the epoch, bumped to stay above the revision they
 * replace, so a key's revision never repeats (not even after delete and re-create).
 */
export function openLmdbStore(options: LmdbStoreOptions): Store {
  const clock = options.clock ?? Date.now;
  const path = resolve(options.path);
  if (openInThisProcess.has(path)) throw new Error(`LMDB store ${path} is already open in this process`);
  // Keys (hashed), accounts and usage are nobody else's business: the directory is closed to
  // other users before LMDB creates its files in it (with the umask's mode), which are then
  // narrowed to the owner as well.
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
  const root: RootDatabase = open({ path, noSubdir: false, maxDbs: 64 });
  for (const file of readdirSync(path)) chmodSync(join(path, file), 0o600);
  openInThisProcess.add(path);
  const buckets = new Map<string, LmdbBucket<unknown>>();
  const revisions = { last: 0 };
  let closed = false;
  return {
    bucket<T>(name: string, bucketOptions: BucketOptions = {}): KvBucket<T> {
      if (closed) throw new Error("store is closed");
      assertValidBucketName(name);
      assertValidTtl(bucketOptions.ttlMs);
      let bucket = buckets.get(name);
      if (!bucket) {
        const db = root.openDB<Stored, string>(name, { useVersions: true, encoding: "json" });
        bucket = new LmdbBucket(name, db, bucketOptions.ttlMs, clock, revisions, options.sweepIntervalMs);
        buckets.set(name, bucket);
      }
      return bucket as KvBucket<T>;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const bucket of buckets.values()) bucket.stop();
      try {
        await root.committed;
        await root.close();
      } finally {
        openInThisProcess.delete(path);
      }
    },
  };
}

class LmdbBucket<T> implements KvBucket<T> {
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping = false;
  private stopped = false;

  constructor(
    readonly name: string,
    private readonly database: Database<Stored, string>,
    private readonly ttlMs: number | undefined,
    private readonly clock: () => number,
    private readonly revisions: { last: number },
    sweepIntervalMs: number | undefined,
  ) {
    if (ttlMs !== undefined) {
      this.sweepTimer = setInterval(() => void this.sweep(), sweepIntervalMs ?? Math.min(ttlMs, 600_000));
      this.sweepTimer.unref();
    }
  }

  /**
   * The bucket's database while the store is open. A read after close would leave lmdb-js a
   * read-transaction reset timer on the closed environment, which throws from a timer (an
   * uncaught exception): work still running at shutdown gets this error instead.
   */
  private get db(): Database<Stored, string> {
    if (this.stopped) throw new Error(`store bucket ${this.name}: the store is closed`);
    return this.database;
  }

  stop(): void {
    this.stopped = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  async get(key: string): Promise<KvEntry<T> | null> {
    assertValidKey(key);
    const entry = this.db.getEntry(key);
    if (!entry || this.expired(entry.value)) return null;
    return { value: entry.value.v as T, revision: entry.version as number };
  }

  async create(key: string, value: T): Promise<number> {
    assertValidKey(key);
    const stored = this.wrap(key, value);
    const existing = this.db.getEntry(key);
    const revision = this.nextRevision(existing?.version);
    let written: boolean;
    if (!existing) {
      written = await this.db.ifNoExists(key, () => void this.db.put(key, stored, revision));
    } else if (this.expired(existing.value)) {
      written = await this.db.put(key, stored, revision, existing.version as number);
    } else {
      written = false;
    }
    if (!written) throw new RevisionConflictError(this.name, key, null);
    return revision;
  }

  async update(key: string, value: T, expectedRevision: number): Promise<number> {
    assertValidKey(key);
    const stored = this.wrap(key, value);
    const existing = this.db.getEntry(key);
    if (!existing || existing.version !== expectedRevision || this.expired(existing.value)) {
      throw new RevisionConflictError(this.name, key, expectedRevision);
    }
    const revision = this.nextRevision(expectedRevision);
    // The check above is only a shortcut; this conditional write is what decides.
    if (!(await this.db.put(key, stored, revision, expectedRevision))) {
      throw new RevisionConflictError(this.name, key, expectedRevision);
    }
    return revision;
  }

  async put(key: string, value: T): Promise<number> {
    assertValidKey(key);
    const stored = this.wrap(key, value);
    const revision = this.nextRevision(this.db.getEntry(key)?.version);
    await this.db.put(key, stored, revision);
    return revision;
  }

  async delete(key: string, expectedRevision?: number): Promise<void> {
    assertValidKey(key);
    if (expectedRevision === undefined) {
      await this.db.remove(key);
      return;
    }
    const existing = this.db.getEntry(key);
    if (!existing || this.expired(existing.value) || !(await this.db.remove(key, expectedRevision))) {
      throw new RevisionConflictError(this.name, key, expectedRevision);
    }
  }

  async *keys(prefix = ""): AsyncIterable<string> {
    assertValidPrefix(prefix);
    const range = prefix === "" ? {} : { start: prefix, end: prefix + KEY_END };
    if (this.ttlMs === undefined) {
      for (const key of this.db.getKeys(range)) yield key;
    } else {
      for (const { key, value } of this.db.getRange(range)) if (!this.expired(value)) yield key;
    }
  }

  private expired(stored: Stored): boolean {
    return this.ttlMs !== undefined && this.clock() - stored.t >= this.ttlMs;
  }

  private wrap(key: string, value: T): Stored {
    if (value === undefined || JSON.stringify(value) === undefined) {
      throw new TypeError(`${this.name}/${key}: value is not JSON`);
    }
    return { v: value, t: this.clock() };
  }

  private nextRevision(previous: number | undefined): number {
    const next = Math.max(this.revisions.last + 1, Date.now() * 1000, (previous ?? 0) + 1);
    this.revisions.last = next;
    return next;
  }

  /** Removes expired entries, a chunk per event turn so that reads are not held up. */
  async sweep(): Promise<number> {
    if (this.ttlMs === undefined || this.sweeping) return 0;
    this.sweeping = true;
    let removed = 0;
    try {
      let after: string | undefined;
      while (!this.stopped) {
        const chunk = [...this.db.getRange({ start: after ?? "", limit: SWEEP_CHUNK + 1, versions: true })].filter(
          (entry) => entry.key !== after,
        );
        if (chunk.length === 0) break;
        const removals: Promise<boolean>[] = [];
        for (const { key, value, version } of chunk) {
          if (this.expired(value)) removals.push(this.db.remove(key, version as number));
        }
        removed += (await Promise.all(removals)).filter(Boolean).length;
        after = chunk[chunk.length - 1]!.key;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.sweeping = false;
    }
    return removed;
  }
}
