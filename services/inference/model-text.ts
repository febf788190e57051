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

/**
 * The text work on a worker thread of its own (text-worker.ts), one request at a time in
 * arrival order, so the event loop only parses the request and hands the text over. The worker
 * keeps the process open only while a request is in flight, and is started again after a crash.
 */
export function workerText(source: TextSource): ModelText {
  let worker: Worker | undefined;
  let nextId = 1;
  const pending = new Map<number, Pending>();

  const failAll = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const start = (): Worker => {
    const started = startModuleWorker("text-worker", { mark: TEXT_WORKER_MARK, source });
    started.on("message", (reply: TextReply) => {
      const p = pending.get(reply.id);
      if (p === undefined) return;
      pending.delete(reply.id);
      if (pending.size === 0) started.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(reply.template ? new TemplateRenderError(reply.message) : new Error(reply.message));
    });
    started.on("error", (err) => failAll(err));
    started.on("exit", (code) => {
      if (worker === started) worker = undefined;
      failAll(new Error(`the text worker exited (code ${code})`));
    });
    started.unref();
    return started;
  };
  const call = <T>(op: Op): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      worker ??= start();
      const id = nextId++;
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.ref();
      worker.postMessage({ ...op, id });
    });

  return {
    encode: (text) => call<number[]>({ op: "encode", text }),
    renderEncode: (variables) => call<number[]>({ op: "renderEncode", variables }),
    scoreTokens: (prefix, suffixes, labels) =>
      call<ScoreTokens>({ op: "scoreTokens", prefix, suffixes: [...suffixes], labels: [...labels] }),
    async close() {
      const running = worker;
      worker = undefined;
      if (running !== undefined) await running.terminate();
    },
  };
}

export function modelText(source: TextSource, onWorker: boolean): ModelText {
  return onWorker ? workerText(source) : inThreadText(textOpsOf(source));
}
