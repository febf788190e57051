// Shared set-up for the accounting tests: the service behind the in-memory Connect
// transport, with a clock the test moves.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { silentLogger as newSilentLogger } from "../../lib/logger.js";
import { createMemoryBucket, createMemoryStore, type KvBucket, openLmdbStore, type Store } from "../../lib/store/index.js";
import { localRateLimiter, RATE_BUCKET, type RateLimiter, sharedRateLimiter } from "../../services/accounting/rate-limit.js";
import type { RateWindow } from "../../services/accounting/records.js";
import { accountingRoutes } from "../../services/accounting/server.js";
import type { AccountingDeps } from "../../services/accounting/service.js";

export const silentLogger = newSilentLogger();

/** 2026-01-15T10:00:00Z: a minute boundary. */
export const T0 = Date.UTC(2026, 0, 15, 10, 0, 0);

export interface Harness {
  client: Client<typeof AccountingService>;
  store: Store;
  /** The limiter the service was wired with: process-local (memory) or compare-and-set (lmdb). */
  rateLimiter: RateLimiter;
  now(): number;
  setTime(ms: number): void;
  advance(ms: number): void;
  close(): Promise<void>;
}

export interface HarnessOptions extends Partial<Omit<AccountingDeps, "store" | "rateLimiter" | "clock" | "logger">> {
  /** Where durable state lives (default memory). */
  durable?: "memory" | "lmdb";
  /** Where rate windows live (default memory). */
  rates?: "memory" | "lmdb";
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  let now = T0;
  const clock = () => now;
  const dirs: string[] = [];
  const open = (kind: "memory" | "lmdb" | undefined): Store => {
    if (kind !== "lmdb") return createMemoryStore({ clock });
    const dir = mkdtempSync(join(tmpdir(), "tessera-accounting-"));
    dirs.push(dir);
    return openLmdbStore({ path: dir, clock });
  };
  const store = open(options.durable);
  // Chosen here, at wiring time, as the launchers do: memory → the process-local limiter.
  const rateStore = options.rates === "lmdb" ? open("lmdb") : undefined;
  const rateLimiter =
    rateStore === undefined
      ? localRateLimiter(createMemoryBucket<RateWindow>(RATE_BUCKET, { clock }))
      : sharedRateLimiter(rateStore.bucket<RateWindow>(RATE_BUCKET));
  const { durable: _d, rates: _r, ...rest } = options;
  const deps: AccountingDeps = {
    defaultRequestsPerMinute: 1000,
    ...rest,
    store,
    rateLimiter,
    clock,
    logger: silentLogger,
  };
  const client = createClient(AccountingService, createRouterTransport(accountingRoutes(deps)));
  return {
    client,
    store,
    rateLimiter,
    now: clock,
    setTime: (ms) => (now = ms),
    advance: (ms) => (now += ms),
    async close() {
      await store.close();
      await rateStore?.close();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The ConnectError a call failed with (fails the test if it succeeded). */
export async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

/**
 * A memory store whose writes to the named buckets fail while `failing` holds their names;
 * every delete is recorded in `deleted` as `bucket/key`.
 */
export function flakyStore(failing: Set<string>, deleted: string[] = []): Store {
  const inner = createMemoryStore();
  const guard = (name: string) => {
    if (failing.has(name)) throw new Error(`disk full (${name})`);
  };
  return {
    bucket<T>(name: string, options?: { ttlMs?: number }): KvBucket<T> {
      const b = inner.bucket<T>(name, options);
      return {
        name,
        get: (key) => b.get(key),
        create: async (key, value) => {
          guard(name);
          return b.create(key, value);
        },
        update: async (key, value, revision) => {
          guard(name);
          return b.update(key, value, revision);
        },
        put: async (key, value) => {
          guard(name);
          return b.put(key, value);
        },
        delete: (key, revision) => {
          deleted.push(`${name}/${key}`);
          return b.delete(key, revision);
        },
        keys: (prefix) => b.keys(prefix),
      };
    },
    close: () => inner.close(),
  };
}
