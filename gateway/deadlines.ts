/** Default of the gateway's per-request deadline (TESSERA_REQUEST_DEADLINE_MS): 10 min. */
export const DEFAULT_DEADLINE_MS = 600_000;

/** The request ran past the gateway's deadline before its answer started. */
export class DeadlineExpired extends Error {
  constructor(readonly deadlineMs: number) {
    super(`the request took longer than ${deadlineMs} ms before its answer started; its work was cancelled`);
    this.name = "DeadlineExpired";
  }
}

/** Something with a deadline: the queue stamps `deadlineAt` (performance.now() time) on it. */
export interface HasDeadline {
  deadlineAt: number;
}

/**
 * Deadlines that all run the same length, on one timer instead of one per item. Items are
 * added in time order, so their deadlines are in the same order: the Set (which iterates
 * in insertion order) is a queue whose first item always expires first. The timer is armed
 * for that first item; an item that finishes leaves the Set and nothing else (a request
 * costs an add and a delete, not a setTimeout and a clearTimeout). When the timer fires it
 * expires what is due and is armed again for the next one.
 *
 * The timer does not hold the process open: whatever an item waits for (a socket, a call)
 * does that.
 */
export class DeadlineQueue<T extends HasDeadline> {
  private readonly pending = new Set<T>();
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    private readonly ms: number,
    private readonly onExpire: (item: T) => void,
    /** What an `onExpire` that throws threw (the items after it still expire). */
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  add(item: T): void {
    item.deadlineAt = this.now() + this.ms;
    this.pending.add(item);
    if (this.timer === undefined) this.arm(this.ms);
  }

  delete(item: T): void {
    this.pending.delete(item);
  }

  get size(): number {
    return this.pending.size;
  }

  /** Stops the timer (nothing pending expires any more). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(this.sweep, ms);
    this.timer.unref();
  }

  private readonly sweep = (): void => {
    this.timer = undefined;
    const now = this.now();
    for (const item of this.pending) {
      // Timers keep whole milliseconds and may fire a fraction of one early.
      const left = item.deadlineAt - now;
      if (left >= 1) {
        this.arm(Math.ceil(left));
        return;
      }
      this.pending.delete(item);
      try {
        this.onExpire(item);
      } catch (err) {
        this.onError(err);
      }
    }
  };
}
