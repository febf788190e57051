import { RevisionConflictError, type KvBucket, type KvEntry } from "./types.js";

export interface CasOptions {
  /** How many times a lost race is retried before giving up (default 100). */
  maxRetries?: number;
}

export interface CasResult<T> {
  /** The value after this call's change (or as this call saw it, when it changed nothing). */
  value: T | undefined;
  /** The revision of the write that carried this change (or of the value seen); null when missing. */
  revision: number | null;
  /** Whether this call's change was written. */
  changed: boolean;
}

/** Thrown when every retry of a read-modify-write lost to another writer. */
export class CasRetriesExhaustedError extends Error {
  override readonly name = "CasRetriesExhaustedError";
  constructor(
    readonly bucket: string,
    readonly key: string,
    readonly attempts: number,
  ) {
    super(`${bucket}/${key}: gave up after ${attempts} conflicting updates`);
  }
}

type Update<T> = (current: T | undefined) => T | undefined;

interface Waiter<T> {
  fn: Update<T>;
  maxRetries: number;
  resolve: (result: CasResult<T>) => void;
  reject: (err: unknown) => void;
}

interface KeyQueue<T> {
  waiting: Waiter<T>[];
  draining: boolean;
}

/**
 * Read-modify-write of one key with compare-and-set, retried while other writers win.
 *
 * `fn` gets the current value (undefined when missing) and returns the new value, or
 * undefined to leave it as it is. It may run several times, so it must not have effects
 * other than setting variables it owns (the last run is the one that counts); to abort,
 * throw: that call fails and writes nothing.
 *
 * Calls in this process on the same key are combined: while one read-modify-write is in
 * flight, later calls queue, and the next round applies all queued functions in order to
 * one read and stores the result with one conditional write (group commit). So callers in
 * one process never conflict with each other, a hot key costs one store round trip per
 * round rather than per call, and retries are only needed against other processes
 * (another replica on NATS, the admin CLI on the same LMDB files).
 */
export function casUpdate<T>(bucket: KvBucket<T>, key: string, fn: Update<T>, options: CasOptions = {}): Promise<CasResult<T>> {
  return new Promise<CasResult<T>>((resolve, reject) => {
    let byKey = queues.get(bucket) as Map<string, KeyQueue<T>> | undefined;
    if (!byKey) {
      byKey = new Map();
      queues.set(bucket, byKey as Map<string, KeyQueue<unknown>>);
    }
    let queue = byKey.get(key);
    if (!queue) {
      queue = { waiting: [], draining: false };
      byKey.set(key, queue);
    }
    queue.waiting.push({ fn, maxRetries: options.maxRetries ?? 100, resolve, reject });
    if (!queue.draining) void drain(bucket, key, queue, byKey);
  });
}

const queues = new WeakMap<object, Map<string, KeyQueue<unknown>>>();

async function drain<T>(bucket: KvBucket<T>, key: string, queue: KeyQueue<T>, byKey: Map<string, KeyQueue<T>>) {
  queue.draining = true;
  try {
    while (queue.waiting.length > 0) await applyRound(bucket, key, queue.waiting.splice(0));
  } finally {
    queue.draining = false;
    if (queue.waiting.length === 0) byKey.delete(key);
  }
}

type Outcome<T> = { ok: true; value: T | undefined; changed: boolean; sawWrite: boolean } | { ok: false; err: unknown };

async function applyRound<T>(bucket: KvBucket<T>, key: string, round: Waiter<T>[]): Promise<void> {
  const maxRetries = Math.max(...round.map((w) => w.maxRetries));
  for (let attempt = 0; ; attempt++) {
    let entry: KvEntry<T> | null;
    try {
      entry = await bucket.get(key);
    } catch (err) {
      for (const w of round) w.reject(err);
      return;
    }
    let value = entry?.value;
    let anyChange = false;
    const outcomes: Outcome<T>[] = round.map((w) => {
      try {
        const sawWrite = anyChange;
        const next = w.fn(value);
        if (next === undefined) return { ok: true, value, changed: false, sawWrite };
        value = next;
        anyChange = true;
        return { ok: true, value: next, changed: true, sawWrite: true };
      } catch (err) {
        return { ok: false, err };
      }
    });
    let revision = entry?.revision ?? null;
    if (anyChange) {
      try {
        revision = entry ? await bucket.update(key, value as T, entry.revision) : await bucket.create(key, value as T);
      } catch (err) {
        if (err instanceof RevisionConflictError && attempt < maxRetries) {
          if (attempt >= 2) await sleep(Math.random() * Math.min(50, 2 ** attempt));
          continue;
        }
        const failure = err instanceof RevisionConflictError ? new CasRetriesExhaustedError(bucket.name, key, attempt + 1) : err;
        for (const w of round) w.reject(failure);
        return;
      }
    }
    round.forEach((w, i) => {
      const o = outcomes[i]!;
      if (!o.ok) w.reject(o.err);
      else w.resolve({ value: o.value, revision: o.sawWrite ? revision : (entry?.revision ?? null), changed: o.changed });
    });
    return;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
