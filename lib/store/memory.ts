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
  json: string;
  revision: number;
  writtenAt: number;
}

/**
 * A process-local store: rate windows in embedded mode, and tests. Values are kept as JSON
 * text so that callers get copies, as they would from a real backend.
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

class MemoryBucket<T> implements KvBucket<T> {
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
    return slot ? { value: JSON.parse(slot.json) as T, revision: slot.revision } : null;
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
    const json = JSON.stringify(value);
    if (json === undefined) throw new TypeError(`${this.name}/${key}: value is not JSON`);
    const revision = ++this.lastRevision;
    // Re-inserting keeps the map in write order, so expired entries are always at its start.
    this.slots.delete(key);
    this.slots.set(key, { json, revision, writtenAt: this.clock() });
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
