import { ConnectError } from "@connectrpc/connect";
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
import { natsUnavailable } from "./connection.js";

export interface NatsStoreOptions {
  /** Prefix of the JetStream KV bucket names, so several deployments can share a server. */
  bucketPrefix?: string;
  /** Replicas of each bucket's stream (1 for a single server, 3 for a cluster). */
  replicas?: number;
  /** How long one KV request may take (default: the connection's timeout). */
  timeoutMs?: number;
  /**
   * Whether NATS is reachable now (NatsLink.connected). While it is not, every operation
   * fails at once with Unavailable instead of waiting for its timeout.
   */
  connected?: () => boolean;
}

/**
 * Store adapter over JetStream KV: every bucket is a KV bucket with history 1, so a key's
 * revision is the stream sequence of its last write, and `update` is a publish with the
 * expected-last-subject-sequence header: the server refuses it when another writer won.
 *
 * Failures of NATS itself (not connected, timeouts, no JetStream responder while the server
 * restarts) are thrown as a ConnectError with code Unavailable: the accounting service
 * passes it on, and the gateway answers 503, fast, until NATS is back.
 */
export function createNatsStore(nc: NatsConnection, options: NatsStoreOptions = {}): Store {
  const kvm = new Kvm(jetstream(nc, options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}));
  const prefix = options.bucketPrefix ?? "tessera";
  const connected = options.connected ?? (() => !nc.isClosed());
  const buckets = new Map<string, KvBucket<unknown>>();

  return {
    bucket<T>(name: string, bucketOptions: BucketOptions = {}): KvBucket<T> {
      assertValidBucketName(name);
      assertValidTtl(bucketOptions.ttlMs);
      let bucket = buckets.get(name);
      if (!bucket) {
        // Opened on first use and again after a failed open (NATS away at that moment).
        let opening: Promise<KV> | undefined;
        const open = () => {
          if (!connected()) return Promise.reject(natsUnavailable());
          opening ??= kvm.create(`${prefix}-${name}`, {
            history: 1,
            replicas: options.replicas ?? 1,
            ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
            ...(bucketOptions.ttlMs !== undefined ? { ttl: bucketOptions.ttlMs } : {}),
          });
          const current = opening;
          current.catch(() => {
            if (opening === current) opening = undefined;
          });
          return current;
        };
        bucket = natsBucket<unknown>(name, open, connected);
        buckets.set(name, bucket);
      }
      return bucket as KvBucket<T>;
    },
    async close() {
      buckets.clear();
    },
  };
}

function natsBucket<T>(name: string, open: () => Promise<KV>, connected: () => boolean): KvBucket<T> {
  /** Runs one KV operation: refused at once while disconnected; NATS failures become Unavailable. */
  async function run<R>(key: string, expected: number | null | undefined, op: (kv: KV) => Promise<R>): Promise<R> {
    if (!connected()) throw natsUnavailable();
    try {
      return await op(await open());
    } catch (err) {
      if (expected !== undefined && isWrongLastSequence(err)) throw new RevisionConflictError(name, key, expected);
      throw asUnavailable(err);
    }
  }

  return {
    name,
    async get(key): Promise<KvEntry<T> | null> {
      assertValidKey(key);
      const entry = await run(key, undefined, (kv) => kv.get(key));
      if (entry?.operation !== "PUT") return null;
      return { value: entry.json<T>(), revision: entry.revision };
    },
    async create(key, value) {
      assertValidKey(key);
      return run(key, null, (kv) => kv.create(key, JSON.stringify(value)));
    },
    async update(key, value, expectedRevision) {
      assertValidKey(key);
      if (!(expectedRevision > 0)) throw new RevisionConflictError(name, key, expectedRevision);
      return run(key, expectedRevision, (kv) => kv.update(key, JSON.stringify(value), expectedRevision));
    },
    async put(key, value) {
      assertValidKey(key);
      return run(key, undefined, (kv) => kv.put(key, JSON.stringify(value)));
    },
    async delete(key, expectedRevision) {
      assertValidKey(key);
      if (expectedRevision === undefined) {
        await run(key, undefined, async (kv) => {
          const current = await kv.get(key);
          if (current && current.operation === "PUT") await kv.delete(key);
        });
        return;
      }
      await run(key, expectedRevision, (kv) => kv.delete(key, { previousSeq: expectedRevision }));
    },
    async *keys(prefix = "") {
      assertValidPrefix(prefix);
      const filter = prefix.endsWith(".") ? `${prefix}>` : undefined;
      const keys = await run(prefix, undefined, (kv) => kv.keys(filter));
      try {
        for await (const key of keys) {
          if (key.startsWith(prefix)) yield key;
        }
      } catch (err) {
        throw asUnavailable(err);
      }
    },
  };
}

function isWrongLastSequence(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** Errors of the NATS client: the connection, its requests, JetStream. */
const NATS_ERRORS = new Set([
  "TimeoutError",
  "NoRespondersError",
  "NoResponders",
  "RequestError",
  "ClosedConnectionError",
  "DrainingConnectionError",
  "ConnectionError",
  "JetStreamError",
  "JetStreamStatusError",
  "JetStreamApiError",
  "JetStreamNotEnabled",
  "StreamNotFoundError",
]);

/** A failure of NATS (as opposed to a bug or bad data) becomes a retryable Unavailable. */
export function asUnavailable(err: unknown): unknown {
  if (err instanceof ConnectError || err instanceof RevisionConflictError) return err;
  if (err instanceof Error && NATS_ERRORS.has(err.name)) return natsUnavailable(`NATS: ${err.message}`, err);
  return err;
}
