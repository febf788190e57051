import { fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { TestTesseraOptions } from "../helpers/tessera.js";
import type { FakeInferenceOptions } from "./fake-inference.js";

export interface HardeningServerOptions extends TestTesseraOptions {
  /** Announce a remote inference worker without a model (fake-inference.ts); use with `models: "none"`. */
  fakeWorker?: FakeInferenceOptions;
}

export interface SlotState {
  free: number;
  total: number;
  started: number;
  cancelled: number;
  finished: number;
}

export interface MemoryUsage {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export interface ServerState {
  /** Object.prototype's own property names, sorted. */
  prototype: string[];
  /** Its enumerable keys: none unless something polluted it. */
  polluted: string[];
  /** Log lines at warn level and above. */
  logs: string[];
}

/** A test Tessera in a child process (server-child.ts). */
export interface TesseraProcess {
  url: string;
  key: string;
  child: ChildProcess;
  /** Set when the process ended before close(): a crash. */
  exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** Memory after full garbage collections. */
  memory(): Promise<MemoryUsage>;
  state(): Promise<ServerState>;
  /** The fake worker's slots and generations. */
  slots(): Promise<SlotState>;
  close(): Promise<void>;
}

const CHILD = join(import.meta.dirname, "server-child.ts");

export async function spawnTessera(options: HardeningServerOptions = {}): Promise<TesseraProcess> {
  const child = fork(CHILD, [], {
    execArgv: ["--expose-gc", "--import", "tsx"],
    env: { ...process.env, HARDENING_OPTIONS: JSON.stringify(options) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const proc: TesseraProcess = {
    url: "",
    key: "",
    child,
    exited: undefined,
    memory: () => ask<MemoryUsage>(child, "memory"),
    state: () => ask<ServerState>(child, "state"),
    slots: () => ask<SlotState>(child, "slots"),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.send({ type: "close" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
  let closing = false;
  child.once("exit", (code, signal) => {
    if (!closing) proc.exited = { code, signal };
  });
  const ready = await new Promise<{ url: string; key: string }>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the Tessera process exited with ${code} before it was ready`)));
    const onMessage = (message: { type: string; url: string; key: string }) => {
      if (message.type !== "ready") return;
      child.off("message", onMessage);
      resolve(message);
    };
    child.on("message", onMessage);
  });
  proc.url = ready.url;
  proc.key = ready.key;
  const close = proc.close;
  proc.close = () => {
    closing = true;
    return close();
  };
  return proc;
}

function ask<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type: string } & T) => {
      if (message.type !== type) return;
      child.off("message", onMessage);
      child.off("exit", onExit);
      resolve(message);
    };
    const onExit = () => reject(new Error(`the Tessera process exited while asked for ${type}`));
    child.on("message", onMessage);
    child.once("exit", onExit);
    child.send({ type });
  });
}
