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

export interface MemoryStoreOptions {
  /** Time source for entry expiry (ms since the epoch). */
  clock?: () => number;
}

interface Slot {
  /** The bucket's own copy; never handed out. */
  value: unknown;
  revision: number;
  writtenAt: number;
}

/** What a read-modify-write by `updateNow` did. */
export interface UpdateNowResult {
  /** The revision after the call (of the write, or of the value seen); null when the key is missing. */
  revision: number | null;
  /** Whether the call wrote a new value. */
  changed: boolean;
}

/**
 * A read-modify-write done at once. Only a store whose writes are process-local can offer
 * it: nothing can run between the read and the write, so it needs neither a compare-and-set
 * round trip nor retries. `fn` gets a copy of the current value (undefined when missing) and
 * returns the new value, or undefined to leave the key as it is; a throw writes nothing.
 */
export interface UpdatesNow<T> {
  updateNow(key: string, fn: (current: T | undefined) => T | undefined): UpdateNowResult;
  /**
   * `updateNow` without its two copies, for small records on a hot path (a rate window on
   * every request): `fn` sees the stored value itself and must not change it, and the value
   * it returns is kept as it is, so it must be a new object of plain JSON data (what
   * `copyJson` would return unchanged) that the caller never touches again.
   */
  replaceNow(key: string, fn: (current: Readonly<T> | undefined) => T | undefined): UpdateNowResult;
}

/** Whether `bucket` can do a read-modify-write at once (the memory store's buckets can). */
export function updatesNow<T>(bucket: KvBucket<T>): bucket is KvBucket<T> & UpdatesNow<T> {
  return bucket instanceof MemoryBucket;
}

/**
 * A process-local store: rate windows in embedded mode, and tests. Callers get copies, as
 * they would from a real backend: what is written is copied in, what is read is copied out,
 * exactly as a JSON round trip would give it (plain data is copied directly, which costs a
 * fraction of serializing it).
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const clock = options.clock ?? Date.now;
  const buckets = new Map<string, MemoryBucket<unknown>>();
  let closed = false;
  return {
    bucket<T>(name: string, bucketOptions: BucketOptions = {}): KvBucket<T> {
      if (closed) throw new Error("store is closed");
      assertValidBucketName(name);
      assertValidTtl(bucketOptions.ttlMs);
      let bucket = buckets.get(name);
      if (!bucket) {
        bucket = new MemoryBucket(name, bucketOptions.ttlMs, clock);
        buckets.set(name, bucket);
      }
      return bucket as KvBucket<T>;
    },
    async close() {
      closed = true;
      buckets.clear();
    },
  };
}

/**
 * One process-local bucket on its own, with the read-modify-write done at once
 * (`UpdatesNow`): what a rate limiter of a single process is wired with.
 */
export function createMemoryBucket<T>(name: string, options: MemoryStoreOptions & BucketOptions = {}): KvBucket<T> & UpdatesNow<T> {
  assertValidBucketName(name);
  assertValidTtl(options.ttlMs);
  return new MemoryBucket<T>(name, options.ttlMs, options.clock ?? Date.now);
}

class MemoryBucket<T> implements KvBucket<T>, UpdatesNow<T> {
  private readonly slots = new Map<string, Slot>();
  private lastRevision = 0;

  constructor(
    readonly name: string,
    private readonly ttlMs: number | undefined,
    private readonly clock: () => number,
  ) {}

  async get(key: string): Promise<KvEntry<T> | null> {
    assertValidKey(key);
    const slot = this.live(key);
    return slot ? { value: copyJson(slot.value) as T, revision: slot.revision } : null;
  }

  async create(key: string, value: T): Promise<number> {
    assertValidKey(key);
    if (this.live(key)) throw new RevisionConflictError(this.name, key, null);
    return this.write(key, value);
  }

  async update(key: string, value: T, expectedRevision: number): Promise<number> {
    assertValidKey(key);
    const slot = this.live(key);
    if (!slot || slot.revision !== expectedRevision) {
      throw new RevisionConflictError(this.name, key, expectedRevision);
    }
    return this.write(key, value);
  }

  async put(key: string, value: T): Promise<number> {
    assertValidKey(key);
    return this.write(key, value);
  }

  updateNow(key: string, fn: (current: T | undefined) => T | undefined): UpdateNowResult {
    assertValidKey(key);
    const slot = this.live(key);
    const next = fn(slot ? (copyJson(slot.value) as T) : undefined);
    if (next === undefined) return { revision: slot?.revision ?? null, changed: false };
    return { revision: this.write(key, next), changed: true };
  }

  replaceNow(key: string, fn: (current: Readonly<T> | undefined) => T | undefined): UpdateNowResult {
    assertValidKey(key);
    const slot = this.live(key);
    const next = fn(slot?.value as T | undefined);
    if (next === undefined) return { revision: slot?.revision ?? null, changed: false };
    return { revision: this.store(key, next, slot), changed: true };
  }

  async delete(key: string, expectedRevision?: number): Promise<void> {
    assertValidKey(key);
    if (expectedRevision !== undefined) {
      const slot = this.live(key);
      if (!slot || slot.revision !== expectedRevision) {
        throw new RevisionConflictError(this.name, key, expectedRevision);
      }
    }
    this.slots.delete(key);
  }

  async *keys(prefix = ""): AsyncIterable<string> {
    assertValidPrefix(prefix);
    for (const key of [...this.slots.keys()]) {
      if (key.startsWith(prefix) && this.live(key)) yield key;
    }
  }

  private live(key: string): Slot | undefined {
    const slot = this.slots.get(key);
    if (slot && this.ttlMs !== undefined && this.clock() - slot.writtenAt >= this.ttlMs) {
      this.slots.delete(key);
      return undefined;
    }
    return slot;
  }

  private write(key: string, value: T): number {
    const copy = copyJson(value);
    if (copy === undefined) throw new TypeError(`${this.name}/${key}: value is not JSON`);
    return this.store(key, copy, this.slots.get(key));
  }

  /** Stores `value` (already the bucket's own) under `key`, whose slot is `slot` if it has one. */
  private store(key: string, value: unknown, slot: Slot | undefined): number {
    const revision = ++this.lastRevision;
    if (this.ttlMs === undefined && slot !== undefined) {
      // Without expiry the order of the map does not matter: update the slot where it is.
      slot.value = value;
      slot.revision = revision;
      slot.writtenAt = this.clock();
      return revision;
    }
    // Re-inserting keeps the map in write order, so expired entries are always at its start.
    this.slots.delete(key);
    this.slots.set(key, { value, revision, writtenAt: this.clock() });
    if (this.ttlMs !== undefined) this.dropExpired();
    return revision;
  }

  private dropExpired(): void {
    const now = this.clock();
    for (const [key, slot] of this.slots) {
      if (now - slot.writtenAt < this.ttlMs!) break;
      this.slots.delete(key);
    }
  }
}

/** Returned by plainCopy for anything it leaves to JSON. */
const NOT_PLAIN = Symbol("not plain");
/** Deeper values are left to JSON (which also reports cycles). */
const MAX_PLAIN_DEPTH = 32;

/**
 * What `JSON.parse(JSON.stringify(value))` gives (undefined where JSON has no text for the
 * value). Plain data — strings, booleans, finite numbers, null, arrays and plain objects of
 * those — is copied directly; anything JSON would transform (toJSON, NaN, undefined
 * members, class instances, `__proto__` keys, cycles) takes the JSON round trip itself.
 */
export function copyJson(value: unknown): unknown {
  const copy = plainCopy(value, 0);
  if (copy !== NOT_PLAIN) return copy;
  const json = JSON.stringify(value);
  return json === undefined ? undefined : JSON.parse(json);
}

function plainCopy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      // JSON writes -0 as 0 and non-finite numbers as null.
      return Number.isFinite(value) ? value + 0 : NOT_PLAIN;
    case "object": {
      if (value === null) return null;
      if (depth >= MAX_PLAIN_DEPTH) return NOT_PLAIN;
      if (Array.isArray(value)) {
        const out = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) {
          const item = plainCopy(value[i], depth + 1);
          if (item === NOT_PLAIN) return NOT_PLAIN;
          out[i] = item;
        }
        return out;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
      const source = value as Record<string, unknown>;
      if (typeof source["toJSON"] === "function") return NOT_PLAIN;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(source)) {
        if (key === "__proto__") return NOT_PLAIN;
        const item = plainCopy(source[key], depth + 1);
        if (item === NOT_PLAIN) return NOT_PLAIN;
        out[key] = item;
      }
      return out;
    }
    default:
      return NOT_PLAIN;
  }
}
