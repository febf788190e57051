/**
 * A single-consumer queue of events pushed by the step loop and pulled by a request
 * handler. The consumer leaving early (`return()`, e.g. a cancelled stream) calls `onClose`.
 */
export class EventChannel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | undefined;
  private ended = false;
  private error: unknown;
  private hasError = false;

  constructor(private readonly onClose: () => void = () => {}) {}

  push(item: T): void {
    if (this.ended) return;
    if (this.waiting !== undefined) {
      const w = this.waiting;
      this.waiting = undefined;
      w.resolve({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** No more events after the queued ones. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiting !== undefined && this.items.length === 0) {
      const w = this.waiting;
      this.waiting = undefined;
      w.resolve({ value: undefined, done: true });
    }
  }

  /** The queued events, then `error` is thrown to the consumer. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.error = error;
    this.hasError = true;
    this.ended = true;
    if (this.waiting !== undefined && this.items.length === 0) {
      const w = this.waiting;
      this.waiting = undefined;
      w.reject(error);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.ended) {
          if (this.hasError) {
            this.hasError = false;
            return Promise.reject(this.error);
          }
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
      },
      return: () => {
        if (!this.ended) this.onClose();
        this.ended = true;
        this.items.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
