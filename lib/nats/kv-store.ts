import { JetStreamApiError, JetStreamApiCodes, jetstream } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
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
} from "../store/types.js";

export interface NatsStoreOptions {
  /** Prefix of the JetStream KV bucket names, so several deployments can share a server. */
  bucketPrefix?: string;
  /** Replicas of each bucket's stream (1 for a single server, 3 for a cluster). */
  replicas?: number;
}

/**
 * Store adapter over JetStream KV: every bucket is a KV bucket with history 1, so a key's
 * revision is the stream sequence of its last write, and `update` is a publish with the
 * expected-last-subject-sequence header: the server refuses it when another writer won.
 */
export function createNatsStore(nc: NatsConnection, options: NatsStoreOptions = {}): Store {
  const kvm = new Kvm(jetstream(nc));
  const prefix = options.bucketPrefix ?? "tessera";
  const buckets = new Map<string, KvBucket<unknown>>();

  return {
    bucket<T>(name: string, bucketOptions: BucketOptions = {}): KvBucket<T> {
      assertValidBucketName(name);
      assertValidTtl(bucketOptions.ttlMs);
      let bucket = buckets.get(name);
      if (!bucket) {
        const kv = kvm.create(`${prefix}-${name}`, {
          history: 1,
          replicas: options.replicas ?? 1,
          ...(bucketOptions.ttlMs !== undefined ? { ttl: bucketOptions.ttlMs } : {}),
        });
        // A failed open is retried on the next call instead of being cached forever.
        kv.catch(() => buckets.delete(name));
        bucket = natsBucket<unknown>(name, kv);
        buckets.set(name, bucket);
      }
      return bucket as KvBucket<T>;
    },
    async close() {
      buckets.clear();
    },
  };
}

function natsBucket<T>(name: string, open: Promise<KV>): KvBucket<T> {
  const conflict = (key: string, expected: number | null) => (err: unknown) => {
    if (isWrongLastSequence(err)) throw new RevisionConflictError(name, key, expected);
    throw err;
  };

  return {
    name,
    async get(key): Promise<KvEntry<T> | null> {
      assertValidKey(key);
      const entry = await (await open).get(key);
      if (!entry || entry.operation !== "PUT") return null;
      return { value: entry.json<T>(), revision: entry.revision };
    },
    async create(key, value) {
      assertValidKey(key);
      return (await open).create(key, JSON.stringify(value)).catch(conflict(key, null));
    },
    async update(key, value, expectedRevision) {
      assertValidKey(key);
      if (!(expectedRevision > 0)) throw new RevisionConflictError(name, key, expectedRevision);
      return (await open).update(key, JSON.stringify(value), expectedRevision).catch(conflict(key, expectedRevision));
    },
    async put(key, value) {
      assertValidKey(key);
      return (await open).put(key, JSON.stringify(value));
    },
    async delete(key, expectedRevision) {
      assertValidKey(key);
      const kv = await open;
      if (expectedRevision === undefined) {
        const current = await kv.get(key);
        if (current && current.operation === "PUT") await kv.delete(key);
        return;
      }
      await kv.delete(key, { previousSeq: expectedRevision }).catch(conflict(key, expectedRevision));
    },
    async *keys(prefix = "") {
      assertValidPrefix(prefix);
      const kv = await open;
      const filter = prefix.endsWith(".") ? `${prefix}>` : undefined;
      for await (const key of await kv.keys(filter)) {
        if (key.startsWith(prefix)) yield key;
      }
    },
  };
}

function isWrongLastSequence(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
