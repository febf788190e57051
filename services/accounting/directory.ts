import { casUpdate, RevisionConflictError } from "../../lib/store/index.js";
import { TtlCache } from "./cache.js";
import { newAccountId, newKeyId } from "./ids.js";
import type { AccountingBuckets, AccountRecord, KeyRecord } from "./records.js";

/**
 * Keys and accounts: reads through a short-lived cache (the request path), writes with
 * compare-and-set, and keeps the cache in step with its own writes.
 */
export class Directory {
  private readonly keysById: TtlCache<KeyRecord>;
  private readonly accountsById: TtlCache<AccountRecord>;
  // A secret's hash never moves to another key, so this needs no expiry; only a size bound.
  private readonly keyIdByHash = new Map<string, string>();

  constructor(
    private readonly buckets: AccountingBuckets,
    private readonly clock: () => number,
    cacheTtlMs: number,
  ) {
    this.keysById = new TtlCache(cacheTtlMs, clock);
    this.accountsById = new TtlCache(cacheTtlMs, clock);
  }

  /** A key from the cache, without waiting; undefined when not cached (use keyById). */
  cachedKey(id: string): KeyRecord | undefined {
    return this.keysById.get(id);
  }

  async keyById(id: string, fresh = false): Promise<KeyRecord | undefined> {
    if (!fresh) {
      const cached = this.keysById.get(id);
      if (cached) return cached;
    }
    const entry = await this.buckets.keys.get(id);
    if (entry) this.keysById.set(id, entry.value);
    return entry?.value;
  }

  /** The cached key a secret's hash belongs to, without waiting; undefined when not cached. */
  cachedKeyByHash(hashHex: string): KeyRecord | undefined {
    const id = this.keyIdByHash.get(hashHex);
    return id === undefined ? undefined : this.keysById.get(id);
  }

  /** The key id a secret's hash is registered under (the key record may be missing). */
  async keyIdForHash(hashHex: string): Promise<string | undefined> {
    const cached = this.keyIdByHash.get(hashHex);
    if (cached) return cached;
    const entry = await this.buckets.keyHashes.get(hashHex);
    if (!entry) return undefined;
    if (this.keyIdByHash.size >= 10_000) this.keyIdByHash.clear();
    this.keyIdByHash.set(hashHex, entry.value.keyId);
    return entry.value.keyId;
  }

  async keyByHash(hashHex: string): Promise<KeyRecord | undefined> {
    const id = await this.keyIdForHash(hashHex);
    return id === undefined ? undefined : this.keyById(id);
  }

  /** An account from the cache, without waiting; undefined when not cached (use account). */
  cachedAccount(id: string): AccountRecord | undefined {
    return this.accountsById.get(id);
  }

  async account(id: string, fresh = false): Promise<AccountRecord | undefined> {
    if (!fresh) {
      const cached = this.accountsById.get(id);
      if (cached) return cached;
    }
    const entry = await this.buckets.accounts.get(id);
    if (entry) this.accountsById.set(id, entry.value);
    return entry?.value;
  }

  async listKeys(): Promise<KeyRecord[]> {
    const keys: KeyRecord[] = [];
    for await (const id of this.buckets.keys.keys()) {
      const entry = await this.buckets.keys.get(id);
      if (entry) keys.push(entry.value);
    }
    return keys.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  async createAccount(init: Pick<AccountRecord, "status" | "textQuota" | "decisionQuota">, id = newAccountId()) {
    const account: AccountRecord = { id, ...init, createdAt: this.clock() };
    await this.buckets.accounts.create(id, account);
    this.accountsById.set(id, account);
    return account;
  }

  /**
   * Registers a secret's hash, then writes the key. In that order, a crash in between leaves
   * a hash pointing at no key, which fails authentication and which EnsureKey repairs; the
   * other order would leave a key in the listing that no secret can reach. Throws
   * RevisionConflictError when the hash is registered already.
   */
  async createKey(init: { accountId: string; name: string; rpm: number; hashHex: string }): Promise<KeyRecord> {
    const id = newKeyId();
    await this.buckets.keyHashes.create(init.hashHex, { keyId: id });
    return this.writeNewKey(id, init);
  }

  /** Writes the key record a registered hash points at. */
  async writeNewKey(id: string, init: { accountId: string; name: string; rpm: number; hashHex: string }): Promise<KeyRecord> {
    const key: KeyRecord = {
      id,
      accountId: init.accountId,
      name: init.name,
      hash: init.hashHex,
      createdAt: this.clock(),
      revokedAt: null,
      rpm: init.rpm,
    };
    await this.buckets.keys.create(id, key);
    this.keysById.set(id, key);
    return key;
  }

  /** Read-modify-write of a key; undefined when it does not exist. `fn` returns undefined to keep it. */
  async updateKey(id: string, fn: (key: KeyRecord) => KeyRecord | undefined): Promise<KeyRecord | undefined> {
    this.keysById.delete(id);
    const result = await casUpdate(this.buckets.keys, id, (current) => (current ? fn(current) : undefined));
    if (result.value) this.keysById.set(id, result.value);
    return result.value;
  }

  async updateAccount(id: string, fn: (account: AccountRecord) => AccountRecord | undefined): Promise<AccountRecord | undefined> {
    this.accountsById.delete(id);
    const result = await casUpdate(this.buckets.accounts, id, (current) => (current ? fn(current) : undefined));
    if (result.value) this.accountsById.set(id, result.value);
    return result.value;
  }

  /** Makes sure an account exists and is active; creates it under `id` when missing. */
  async activateAccount(id: string): Promise<AccountRecord> {
    for (;;) {
      const updated = await this.updateAccount(id, (a) => (a.status === "active" ? undefined : { ...a, status: "active" }));
      if (updated) return updated;
      try {
        return await this.createAccount({ status: "active", textQuota: 0, decisionQuota: 0 }, id);
      } catch (err) {
        if (!(err instanceof RevisionConflictError)) throw err; // created meanwhile: update it
      }
    }
  }
}
