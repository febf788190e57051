export * from "./types.js";
export { casUpdate, CasRetriesExhaustedError, type CasOptions, type CasResult } from "./cas.js";
export { createMemoryBucket, createMemoryStore, type MemoryStoreOptions, type UpdateNowResult, type UpdatesNow } from "./memory.js";
export { openLmdbStore, type LmdbStoreOptions } from "./lmdb.js";
