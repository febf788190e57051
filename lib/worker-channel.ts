import type { Transferable } from "node:worker_threads";

/**
 * What the channel needs of its worker: a `node:worker_threads` Worker, or a thread reached
 * through a port whose lifecycle another thread reports (onnx-host-client.ts).
 */
export interface ChannelWorker {
  postMessage(message: unknown, transfer?: readonly Transferable[]): void;
  /** "message" (the reply), "error" and "messageerror" (an Error), "exit" (the exit code). */
  // biome-ignore lint/suspicious/noExplicitAny: the listener type of Worker.on, so that a Worker is one
  on(event: "message" | "error" | "messageerror" | "exit", listener: (...args: any[]) => void): unknown;
  ref(): void;
  unref(): void;
  terminate(): Promise<number>;
}

/** A request without the id the channel gives it (distributes over a union of requests). */
export type Unnumbered<R> = R extends { id: number } ? Omit<R, "id"> : never;

/** What a reply settles its call with: a value, or an error to reject it with. */
export type Settled = { value: unknown } | { error: Error };

export interface WorkerChannelOptions<Reply extends { id: number }> {
  /** Starts the worker (startModuleWorker): at once, and again after an exit where `restart` is set. */
  start(): ChannelWorker;
  /** How errors name the worker: "the text worker". */
  name: string;
  /** What a reply settles its call with. */
  settle(reply: Reply): Settled;
  /**
   * After the worker exits (a crash, terminate), start a fresh one on the next call. Without
   * it the channel is gone: every later call fails with the error the worker left.
   */
  restart?: boolean;
  /** Start the worker on the first call rather than at once. */
  lazy?: boolean;
  /** Told when a worker of this channel exits, after its pending calls have failed. */
  onExit?(code: number): void;
}

type Pending = { worker: ChannelWorker; resolve: (value: unknown) => void; reject: (err: Error) => void };

/**
 * Typed request/reply calls to one worker thread. Each call gets an id the worker's reply
 * carries back, and may transfer buffers. The worker keeps the process open only while a call
 * is pending. A worker that crashes or exits fails every call pending on it with an error
 * naming it; the channel then starts a fresh worker on the next call (`restart`), or stays
 * gone and fails later calls.
 */
export class WorkerChannel<Request extends { id: number }, Reply extends { id: number }> {
  #worker: ChannelWorker | undefined;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #gone: Error | undefined;
  /** Calls pending on each worker: it is ref'd while it has any. */
  readonly #inFlight = new Map<ChannelWorker, number>();

  constructor(private readonly options: WorkerChannelOptions<Reply>) {
    if (options.lazy !== true) this.#worker = this.#start();
  }

  /** Calls pending. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Set once a channel without restart has lost its worker: every later call fails with it. */
  get gone(): Error | undefined {
    return this.#gone;
  }

  /** Sends `request` with a fresh id and resolves with what its reply settles. */
  call<T>(request: Unnumbered<Request>, transfer: readonly Transferable[] = []): Promise<T> {
    if (this.#gone !== undefined) return Promise.reject(this.#gone);
    this.#worker ??= this.#start();
    const worker = this.#worker;
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const inFlight = this.#inFlight.get(worker) ?? 0;
      if (inFlight === 0) worker.ref();
      this.#inFlight.set(worker, inFlight + 1);
      this.#pending.set(id, { worker, resolve: resolve as (value: unknown) => void, reject });
      try {
        worker.postMessage({ ...request, id }, transfer);
      } catch (err) {
        this.#settled(id);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Sends a message that wants no reply (its id is 0); dropped once the worker is gone. */
  post(message: Request): void {
    if (this.#gone === undefined) this.#worker?.postMessage(message);
  }

  /**
   * Stops the worker. The calls pending on it fail with `reason` where one is given (and a
   * channel without restart then fails later calls with it), else as its exit fails them.
   */
  async terminate(reason?: Error): Promise<void> {
    const worker = this.#worker;
    if (worker === undefined) {
      if (!this.options.restart && reason !== undefined) this.#gone ??= reason;
      return;
    }
    if (reason !== undefined) this.#lost(worker, reason);
    if (this.options.restart) this.#worker = undefined;
    await worker.terminate();
  }

  #start(): ChannelWorker {
    const worker = this.options.start();
    const { name } = this.options;
    worker.unref();
    worker.on("message", (reply: Reply) => {
      const p = this.#pending.get(reply.id);
      if (p === undefined) return;
      this.#settled(reply.id);
      const settled = this.options.settle(reply);
      if ("error" in settled) p.reject(settled.error);
      else p.resolve(settled.value);
    });
    worker.on("error", (err) => this.#lost(worker, new Error(`${name} failed: ${err.message}`, { cause: err })));
    worker.on("messageerror", (err) => this.#lost(worker, new Error(`${name} message failed: ${err.message}`, { cause: err })));
    worker.on("exit", (code) => {
      this.#lost(worker, new Error(`${name} exited (code ${code})`));
      if (this.#worker === worker) this.#worker = undefined;
      this.options.onExit?.(code);
    });
    return worker;
  }

  /** Fails the calls pending on `worker`; a channel without restart is gone with `err`. */
  #lost(worker: ChannelWorker, err: Error): void {
    if (!this.options.restart && worker === this.#worker) this.#gone ??= err;
    for (const [id, p] of this.#pending) {
      if (p.worker !== worker) continue;
      this.#settled(id);
      p.reject(err);
    }
  }

  #settled(id: number): void {
    const p = this.#pending.get(id);
    if (p === undefined) return;
    this.#pending.delete(id);
    const inFlight = this.#inFlight.get(p.worker)! - 1;
    if (inFlight > 0) this.#inFlight.set(p.worker, inFlight);
    else {
      this.#inFlight.delete(p.worker);
      p.worker.unref();
    }
  }
}
