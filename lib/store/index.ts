export * from "./types.js";
export { casUpdate, CasRetriesExhaustedError, type CasOptions, type CasResult } from "./cas.js";
export { createMemoryStore, type MemoryStoreOptions } from "./memory.js";
export { openLmdbStore, type LmdbStoreOptions } from "./lmdb.js";
