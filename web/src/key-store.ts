const STORAGE_KEY = "tessera.playground.key";

/**
 * The API key: held in memory only, unless "remember on this tab" is ticked, then also in
 * sessionStorage (gone when the tab closes). It is only ever sent to this page's own server.
 */
export class KeyStore {
  private value = "";
  private remembered = false;
  private readonly listeners: (() => void)[] = [];

  constructor(private readonly storage: Storage | undefined) {
    const saved = storage?.getItem(STORAGE_KEY);
    if (saved) {
      this.value = saved;
      this.remembered = true;
    }
  }

  get key(): string {
    return this.value;
  }

  get remember(): boolean {
    return this.remembered;
  }

  set(key: string): void {
    const trimmed = key.trim();
    if (trimmed === this.value) return;
    this.value = trimmed;
    this.persist();
    for (const listener of this.listeners) listener();
  }

  setRemember(remember: boolean): void {
    this.remembered = remember;
    this.persist();
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  private persist(): void {
    if (this.remembered && this.value !== "") this.storage?.setItem(STORAGE_KEY, this.value);
    else this.storage?.removeItem(STORAGE_KEY);
  }
}
