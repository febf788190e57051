import { join } from "node:path";
import type { Logger } from "../../lib/logger.js";
import { createMemoryStore, openLmdbStore, type Store } from "../../lib/store/index.js";
import { createAccountingService, type AccountingServiceImpl } from "./service.js";

export interface EmbeddedAccountingOptions {
  /** TESSERA_DATA_DIR; the LMDB files go to `<dataDir>/accounting`. */
  dataDir: string;
  logger: Logger;
  defaultRequestsPerMinute: number;
  clock?: () => number;
}

export interface EmbeddedAccounting {
  service: AccountingServiceImpl;
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
  const rateStore = createMemoryStore(options.clock && { clock: options.clock });
  const service = createAccountingService({
    store,
    rateStore,
    logger: options.logger,
    defaultRequestsPerMinute: options.defaultRequestsPerMinute,
    ...(options.clock && { clock: options.clock }),
  });
  return {
    service,
    store,
    async close() {
      await rateStore.close();
      await store.close();
    },
  };
}
