import type { Worker } from "node:worker_threads";
import type { ChatTemplateVariables } from "./chat-prompt.js";
import { startModuleWorker } from "./module-worker.js";
import { TemplateRenderError, textOpsOf, type ScoreTokens, type TextOps, type TextSource } from "./text-ops.js";
import { TEXT_WORKER_MARK, type TextReply, type TextRequest } from "./text-worker.js";

/**
 * A model's text work for requests — chat template rendering and tokenization of prompts,
 * decision states and questions — as promises, so that it can run on a worker thread.
 */
export interface ModelText {
  encode(text: string): Promise<number[]>;
  /** Renders the chat template and tokenizes the result; TemplateRenderError if it cannot render. */
  renderEncode(variables: ChatTemplateVariables): Promise<number[]>;
  scoreTokens(prefix: string, suffixes: readonly string[], labels: readonly string[]): Promise<ScoreTokens>;
  close(): Promise<void>;
}

/** The text work on the calling thread (tests, and TESSERA_ORT_WORKER=off). */
export function inThreadText(ops: TextOps): ModelText {
  return {
    encode: async (text) => ops.encode(text),
    renderEncode: async (variables) => ops.renderEncode(variables),
    scoreTokens: async (prefix, suffixes, labels) => ops.scoreTokens(prefix, suffixes, labels),
    close: async () => undefined,
  };
}

type Pending = { resolve: (value: unknown) => void; reject: (err: Error) => void };
type Op = TextRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/** Text worker threads per model: a small request goes to one not busy with a large one. */
export const TEXT_WORKERS = 2;
/** Characters of text in flight on the first thread past which a request goes to the least busy thread (about 70 ms of tokenizing). */
const BUSY_CHARS = 64 * 1024;

/** One text worker thread (text-worker.ts), started on first use and again after a crash. */
class TextThread {
  private worker: Worker | undefined;
  private nextId = 1;
  readonly pending = new Map<number, Pending>();
  /** Characters of the requests in flight. */
  chars = 0;

  constructor(private readonly source: TextSource) {}

  call<T>(op: Op, chars: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.worker ??= this.start();
      const id = this.nextId++;
      this.chars += chars;
      const settle =
        <V>(then: (v: V) => void) =>
        (v: V) => {
          this.chars -= chars;
          then(v);
        };
      this.pending.set(id, { resolve: settle(resolve as (value: unknown) => void), reject: settle(reject) });
      this.worker.ref();
      this.worker.postMessage({ ...op, id });
    });
  }

  async close(): Promise<void> {
    const running = this.worker;
    this.worker = undefined;
    if (running !== undefined) await running.terminate();
  }

  private start(): Worker {
    const started = startModuleWorker("text-worker", { mark: TEXT_WORKER_MARK, source: this.source });
    started.on("message", (reply: TextReply) => {
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) started.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(reply.template ? new TemplateRenderError(reply.message) : new Error(reply.message));
    });
    started.on("error", (err) => this.failAll(err));
    started.on("exit", (code) => {
      if (this.worker === started) this.worker = undefined;
      this.failAll(new Error(`the text worker exited (code ${code})`));
    });
    started.unref();
    return started;
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

/**
 * The text work on worker threads of its own (text-worker.ts), so the event loop only parses
 * the request and hands the text over. Requests go to the first thread in arrival order
 * while it has little text in flight; past BUSY_CHARS, to the thread with the least text in
 * flight, so a small request does not queue behind a large one (each thread takes its
 * requests in arrival order). Threads keep the process open only
 * while a request is in flight, and are started again after a crash.
 */
export function workerText(source: TextSource, threads = TEXT_WORKERS): ModelText {
  const pool = Array.from({ length: Math.max(1, threads) }, () => new TextThread(source));
  const call = <T>(op: Op): Promise<T> => {
    const chars = textChars(op);
    const first = pool[0]!;
    const thread = first.chars < BUSY_CHARS ? first : pool.reduce((a, b) => (b.chars < a.chars ? b : a));
    return thread.call<T>(op, chars);
  };
  return {
    encode: (text) => call<number[]>({ op: "encode", text }),
    renderEncode: (variables) => call<number[]>({ op: "renderEncode", variables }),
    scoreTokens: (prefix, suffixes, labels) =>
      call<ScoreTokens>({ op: "scoreTokens", prefix, suffixes: [...suffixes], labels: [...labels] }),
    async close() {
      await Promise.all(pool.map((t) => t.close()));
    },
  };
}

/** Characters of the strings in a request: its tokenizing cost, give or take. */
function textChars(value: unknown): number {
  if (typeof value === "string") return value.length;
  if (Array.isArray(value)) return value.reduce((sum: number, v) => sum + textChars(v), 0);
  if (typeof value === "object" && value !== null) return Object.values(value).reduce((sum: number, v) => sum + textChars(v), 0);
  return 0;
}

export function modelText(source: TextSource, onWorker: boolean): ModelText {
  return onWorker ? workerText(source) : inThreadText(textOpsOf(source));
}
