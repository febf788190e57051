/**
 * A key-value store built for compare-and-set, shaped after NATS JetStream KV so that one
 * adapter per backend (LMDB, memory, NATS) fits behind it unchanged.
 *
 * - Values are JSON values (objects, arrays, strings, numbers, booleans, null). Every adapter
 *   must behave as if it serialised them: a value read back is a fresh copy.
 * - Keys use only the characters NATS KV allows, `[-/_=.a-zA-Z0-9]`, and neither start nor
 *   end with `.`. Use `.` to separate levels (`acct.<id>`) so that prefix listings map onto
 *   NATS subject filters (`acct.>`).
 * - A revision is a positive integer that changes on every write of a key and is never
 *   reused for that key, also across delete and re-create. Callers compare revisions for
 *   equality only; their size means nothing.
 */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface KvEntry<T> {
  value: T;
  revision: number;
}

export interface KvBucket<T = JsonValue> {
  /** The bucket's name (as passed to `Store.bucket`). */
  readonly name: string;
  /** The current entry, or null when the key does not exist (or has expired). */
  get(key: string): Promise<KvEntry<T> | null>;
  /** Writes a key that must not exist yet; throws RevisionConflictError if it does. */
  create(key: string, value: T): Promise<number>;
  /** Writes a key whose current revision must be `expectedRevision`; else RevisionConflictError. */
  update(key: string, value: T, expectedRevision: number): Promise<number>;
  /** Writes a key unconditionally. */
  put(key: string, value: T): Promise<number>;
  /**
   * Deletes a key. With `expectedRevision`, only if that is its current revision (else
   * RevisionConflictError); without it, deleting a missing key does nothing.
   */
  delete(key: string, expectedRevision?: number): Promise<void>;
  /** The keys that start with `prefix` (all keys when omitted), in no particular order. */
  keys(prefix?: string): AsyncIterable<string>;
}

export interface BucketOptions {
  /**
   * Entries expire this long after their last write (NATS KV `ttl`/max_age). An expired
   * entry reads as missing and may be created again. Omitted: entries never expire.
   */
  ttlMs?: number;
}

export interface Store {
  /**
   * Opens (creating if needed) a bucket. Names use `[-_a-zA-Z0-9]`. Opening the same name
   * twice gives the same bucket; its options are fixed by the first call.
   */
  bucket<T = JsonValue>(name: string, options?: BucketOptions): KvBucket<T>;
  close(): Promise<void>;
}

/** A conditional write lost: the key exists (create) or changed since it was read (update/delete). */
export class RevisionConflictError extends Error {
  override readonly name = "RevisionConflictError";
  constructor(
    readonly bucket: string,
    readonly key: string,
    readonly expectedRevision: number | null,
  ) {
    super(expectedRevision === null ? `${bucket}/${key} already exists` : `${bucket}/${key} is no longer at revision ${expectedRevision}`);
  }
}

/** A key or bucket name that some backend would refuse. */
export class InvalidKeyError extends Error {
  override readonly name = "InvalidKeyError";
}

const KEY_RE = /^[-/_=.a-zA-Z0-9]+$/;
const BUCKET_RE = /^[-_a-zA-Z0-9]+$/;
const MAX_KEY_LENGTH = 1024;

export function assertValidKey(key: string): void {
  if (
    typeof key !== "string" ||
    key.length === 0 ||
    key.length > MAX_KEY_LENGTH ||
    !KEY_RE.test(key) ||
    key.startsWith(".") ||
    key.endsWith(".")
  ) {
    throw new InvalidKeyError(`invalid store key ${JSON.stringify(key)}: use [-/_=.a-zA-Z0-9], no leading or trailing '.'`);
  }
}

export function assertValidPrefix(prefix: string): void {
  if (prefix === "") return;
  if (!KEY_RE.test(prefix) || prefix.startsWith(".")) {
    throw new InvalidKeyError(`invalid store key prefix ${JSON.stringify(prefix)}`);
  }
}

export function assertValidBucketName(name: string): void {
  if (typeof name !== "string" || !BUCKET_RE.test(name) || name.length > 64) {
    throw new InvalidKeyError(`invalid bucket name ${JSON.stringify(name)}: use [-_a-zA-Z0-9], at most 64 characters`);
  }
}

export function assertValidTtl(ttlMs: number | undefined): void {
  if (ttlMs !== undefined && (!Number.isFinite(ttlMs) || ttlMs <= 0)) {
    throw new RangeError(`bucket ttlMs must be a positive number, got ${ttlMs}`);
  }
}
