/**
 * A small map whose entries go stale after `ttlMs`. Holds key and account records on the
 * request path so that Authenticate and Admit do not read the store each time; changes made
 * in this process invalidate entries at once, changes made elsewhere (another replica, the
 * admin CLI on the same files) are seen within `ttlMs`.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly clock: () => number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.clock()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V): void {
    if (this.ttlMs <= 0) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) {
      // Maps iterate in insertion order: drop the oldest.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { value, expiresAt: this.clock() + this.ttlMs });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}
