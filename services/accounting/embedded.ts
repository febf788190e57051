import { join } from "node:path";
import type { Logger } from "../../lib/logger.js";
import { createMemoryBucket, openLmdbStore, type Store } from "../../lib/store/index.js";
import { localRateLimiter, RATE_BUCKET } from "./rate-limit.js";
import { openBuckets, type RateWindow, SETTLED_RETENTION_MS } from "./records.js";
import type { ServiceMount } from "../../lib/service-mount.js";
import { recoverAccounting } from "./recover.js";
import { accountingRoutes } from "./server.js";

export interface EmbeddedAccountingOptions {
  /** TESSERA_DATA_DIR; the LMDB files go to `<dataDir>/accounting`. */
  dataDir: string;
  logger: Logger;
  defaultRequestsPerMinute: number;
  clock?: () => number;
  /**
   * The server owning the data directory: first make the store exact again after an unclean
   * stop (recover.ts). Not for `tessera keys`, which runs beside a live server.
   */
  recover?: boolean;
  /**
   * `tessera keys` without TESSERA_DEFAULT_RPM of its own: show the default rate the server
   * on this data directory applies (recorded by it at start), not this process's fallback.
   */
  serverDefaults?: boolean;
}

/** What the server owning the data directory applies, recorded at its start for `tessera keys`. */
const SETTINGS_BUCKET = "accounting_settings";
type ServerSettings = { defaultRequestsPerMinute: number };

export interface EmbeddedAccounting {
  /** The accounting service's mount (server.ts). */
  routes: ServiceMount;
  /** The durable store (LMDB). */
  store: Store;
  close(): Promise<void>;
}

/**
 * Accounting for the single-process deployment: durable state in LMDB under the data
 * directory, per-minute rate windows in memory (the request path writes nothing to disk
 * unless it reserves quota; windows restart empty after a restart, which can only let a key
 * make up to one extra minute's worth of requests).
 */
export async function openEmbeddedAccounting(options: EmbeddedAccountingOptions): Promise<EmbeddedAccounting> {
  const store = openLmdbStore({ path: join(options.dataDir, "accounting"), ...(options.clock && { clock: options.clock }) });
  if (options.recover === true) {
    try {
      await recoverAccounting(openBuckets(store, SETTLED_RETENTION_MS), options.logger);
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  let defaultRequestsPerMinute = options.defaultRequestsPerMinute;
  const settings = store.bucket<ServerSettings>(SETTINGS_BUCKET);
  if (options.recover === true) await settings.put("server", { defaultRequestsPerMinute });
  else if (options.serverDefaults === true) {
    defaultRequestsPerMinute = (await settings.get("server"))?.value.defaultRequestsPerMinute ?? defaultRequestsPerMinute;
  }
  const routes = accountingRoutes({
    store,
    rateLimiter: localRateLimiter(createMemoryBucket<RateWindow>(RATE_BUCKET, options.clock && { clock: options.clock })),
    logger: options.logger,
    defaultRequestsPerMinute,
    ...(options.clock && { clock: options.clock }),
  });
  return {
    routes,
    store,
    async close() {
      await store.close();
    },
  };
}
