import type { Principal } from "../gen/tessera/accounting/v1/accounting_pb.js";

export interface PrincipalCacheOptions {
  ttlMs?: number;
  maxEntries?: number;
  clock?: () => number;
}

/**
 * Who a key belongs to, remembered for a while so a cheap request needs one accounting call
 * (Admit) instead of two. Safe only where Admit follows at once: Admit checks the key and
 * its account again (revoked → 401, disabled/unverified → 403), so a cached entry never lets
 * a revoked key or a disabled account through. Successful lookups only; at most
 * `maxEntries` keys, the map starting over when full.
 */
export function createPrincipalCache(options: PrincipalCacheOptions = {}) {
  const ttlMs = options.ttlMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 10_000;
  const clock = options.clock ?? Date.now;
  const entries = new Map<string, { principal: Principal; expires: number }>();
  return {
    get(apiKey: string): Principal | undefined {
      const entry = entries.get(apiKey);
      if (entry === undefined) return undefined;
      if (entry.expires <= clock()) {
        entries.delete(apiKey);
        return undefined;
      }
      return entry.principal;
    },
    set(apiKey: string, principal: Principal): void {
      if (entries.size >= maxEntries) entries.clear();
      entries.set(apiKey, { principal, expires: clock() + ttlMs });
    },
    delete(apiKey: string): void {
      entries.delete(apiKey);
    },
  };
}

export type PrincipalCache = ReturnType<typeof createPrincipalCache>;
