import { Cancelled, Overloaded } from "./engine-errors.js";

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

/**
 * Generation slots of one model with a bounded wait queue. A request that finds every slot
 * busy and the queue full is refused at once with ResourceExhausted and the Overloaded
 * detail (the gateway answers 529 with retry-after).
 */
export class SlotPool {
  private busy = 0;
  private readonly waiters: Waiter[] = [];
  /** Moving average of how long a slot is held, for retry-after. */
  private holdSeconds = 1;

  constructor(
    readonly modelName: string,
    readonly total: number,
    readonly queueLimit: number,
    private readonly onChange: (busy: number) => void = () => {},
    /** What the slots run, as the overload message names them. */
    private readonly kind: "generation" | "decision" = "generation",
  ) {
    if (!Number.isInteger(total) || total < 1) throw new Error("slots must be a positive integer");
    if (!Number.isInteger(queueLimit) || queueLimit < 0) throw new Error("queue must be a non-negative integer");
  }

  get free(): number {
    return this.total - this.busy;
  }

  get queued(): number {
    return this.waiters.length;
  }

  /** Waits for a slot; refuses at once when the queue is full; rejects when `signal` aborts. */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(canceled());
    if (this.busy < this.total) {
      this.busy++;
      this.onChange(this.busy);
      return Promise.resolve();
    }
    if (this.waiters.length >= this.queueLimit) return Promise.reject(this.overloaded());
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(canceled());
        },
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Gives a slot back (to the first waiter, if any); `heldSeconds` feeds retry-after. */
  release(heldSeconds?: number): void {
    if (heldSeconds !== undefined && Number.isFinite(heldSeconds)) {
      this.holdSeconds = 0.8 * this.holdSeconds + 0.2 * heldSeconds;
    }
    const next = this.waiters.shift();
    if (next !== undefined) {
      next.signal?.removeEventListener("abort", next.onAbort);
      next.resolve();
      return;
    }
    this.busy--;
    this.onChange(this.busy);
  }

  /** Refuses everyone still waiting (shutdown). */
  rejectWaiting(err: unknown): void {
    for (const waiter of this.waiters.splice(0)) {
      waiter.signal?.removeEventListener("abort", waiter.onAbort);
      waiter.reject(err);
    }
  }

  private overloaded(): Overloaded {
    const retryAfterSeconds = Math.max(1, Math.ceil((this.holdSeconds * (this.waiters.length + 1)) / this.total));
    return new Overloaded(
      `model "${this.modelName}" is overloaded: all ${this.total} ${this.kind} slots are busy and the wait queue is full`,
      retryAfterSeconds,
    );
  }
}

export function canceled(): Cancelled {
  return new Cancelled();
}
