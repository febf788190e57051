// The main-thread side of onnx-host.ts: session workers started by the host thread, so that
// they flush denormals, each reached through a port of its own and seen by a WorkerChannel as
// a worker.
import { EventEmitter } from "node:events";
import { MessageChannel, type MessagePort, type Transferable, type Worker } from "node:worker_threads";
import { startModuleWorker } from "../../../lib/module-worker.js";
import type { ChannelWorker } from "../../../lib/worker-channel.js";
import { HOST_MARK, type HostEvent, type HostRequest } from "./onnx-host.js";

/** A session worker as a WorkerChannel sees it: messages through its port, exit and errors reported by the host. */
class HostedWorker extends EventEmitter implements ChannelWorker {
  #exited: Promise<number>;
  #exit!: (code: number) => void;

  constructor(
    private readonly port: MessagePort,
    private readonly host: SessionHost,
    readonly child: number,
  ) {
    super();
    this.#exited = new Promise((resolve) => {
      this.#exit = resolve;
    });
    port.on("message", (message) => this.emit("message", message));
    port.on("messageerror", (err) => this.emit("messageerror", err));
  }

  postMessage(message: unknown, transfer: readonly Transferable[] = []): void {
    this.port.postMessage(message, [...transfer]);
  }

  ref(): void {
    this.port.ref();
  }

  unref(): void {
    this.port.unref();
  }

  terminate(): Promise<number> {
    this.host.request({ kind: "terminate", child: this.child });
    return this.host.holdOpen(this.#exited);
  }

  /** Called by the host once the worker's thread is gone. */
  exited(code: number): void {
    this.port.close();
    this.emit("exit", code);
    this.#exit(code);
  }
}

/** The host thread, started on first use; when it is gone (a crash), every worker it started has exited and the next start starts a new host. */
class SessionHost {
  readonly #worker: Worker;
  readonly #children = new Map<number, HostedWorker>();
  #next = 1;
  /** Waits that keep the process open: the host's setup, then each termination until its exit is reported. */
  #waits = 0;
  /** Whether the host's thread flushes denormals, once it has set itself up. */
  readonly ready: Promise<boolean>;

  constructor(onGone: (host: SessionHost) => void) {
    this.#worker = startModuleWorker("onnx-host", import.meta.url, HOST_MARK);
    let setUp!: (flushes: boolean) => void;
    this.ready = new Promise((resolve) => {
      setUp = resolve;
    });
    this.#worker.on("message", (event: HostEvent) => {
      if (event.kind === "ready") return setUp(event.flushesDenormals);
      const child = this.#children.get(event.child);
      if (child === undefined) return;
      if (event.kind === "error") child.emit("error", Object.assign(new Error(event.message), { name: event.name }));
      else {
        this.#children.delete(event.child);
        child.exited(event.code);
      }
    });
    const gone = (code: number) => {
      onGone(this);
      setUp(false);
      for (const child of this.#children.values()) child.exited(code);
      this.#children.clear();
    };
    this.#worker.on("error", () => gone(1));
    this.#worker.on("exit", gone);
    // Otherwise only its children's ports, while a call is pending on them, keep the process
    // open. (Not before the listeners: adding a "message" listener refs a worker again.)
    this.#worker.unref();
    void this.holdOpen(this.ready);
  }

  /** Keeps the process open until `wait` settles (a Worker's own setup and terminate do). */
  holdOpen<T>(wait: Promise<T>): Promise<T> {
    if (this.#waits++ === 0) this.#worker.ref();
    return wait.finally(() => {
      if (--this.#waits === 0) this.#worker.unref();
    });
  }

  start(): HostedWorker {
    const { port1, port2 } = new MessageChannel();
    const child = new HostedWorker(port1, this, this.#next++);
    this.#children.set(child.child, child);
    this.request({ kind: "spawn", child: child.child, port: port2 }, [port2]);
    return child;
  }

  request(req: HostRequest, transfer: Transferable[] = []): void {
    this.#worker.postMessage(req, transfer);
  }
}

let host: SessionHost | undefined;

function sessionHost(): SessionHost {
  host ??= new SessionHost((gone) => {
    if (host === gone) host = undefined;
  });
  return host;
}

/** Starts a session worker (onnx-worker.ts) as a child of the host thread. */
export function startSessionWorker(): ChannelWorker {
  return sessionHost().start();
}

/**
 * Starts the host thread if it is not running and resolves with whether it flushes denormals.
 * Awaited before any session opens on this thread, so that the host's session is the process's
 * first (whose option alone sets the modes).
 */
export function sessionHostReady(): Promise<boolean> {
  return sessionHost().ready;
}
