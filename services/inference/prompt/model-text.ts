import { startModuleWorker } from "../../../lib/module-worker.js";
import { type Unnumbered, WorkerChannel } from "../../../lib/worker-channel.js";
import type { ChatTemplateVariables } from "./chat-prompt.js";
import { TemplateRenderError, textOpsOf, type ScoreTokens, type TextOps, type TextSource } from "./text-ops.js";
import { TEXT_WORKER_MARK, type TextReply, type TextRequest } from "./text-worker.js";

/**
 * A model's text work for requests — chat template rendering and tokenization of prompts,
 * decision states and questions — as promises, so that it can run on a worker thread.
 */
export interface ModelText {
  encode(text: string): Promise<number[]>;
  /** A prompt rendered from escaped user text (user-text.ts), tokenized: the user's special tokens as text. */
  encodePrompt(rendered: string): Promise<number[]>;
  /** Renders the chat template and tokenizes the result; TemplateRenderError if it cannot render. */
  renderEncode(variables: ChatTemplateVariables): Promise<number[]>;
  scoreTokens(prefix: string, suffixes: readonly string[], labels: readonly string[]): Promise<ScoreTokens>;
  close(): Promise<void>;
}

/** The text work on the calling thread (tests, and TESSERA_ORT_WORKER=off). */
export function inThreadText(ops: TextOps): ModelText {
  return {
    encode: async (text) => ops.encode(text),
    encodePrompt: async (rendered) => ops.encodePrompt(rendered),
    renderEncode: async (variables) => ops.renderEncode(variables),
    scoreTokens: async (prefix, suffixes, labels) => ops.scoreTokens(prefix, suffixes, labels),
    close: async () => undefined,
  };
}

/** Text worker threads per model: a small request goes to one not busy with a large one. */
export const TEXT_WORKERS = 2;
/** Characters of text in flight on the first thread past which a request goes to the least busy thread (about 70 ms of tokenizing). */
const BUSY_CHARS = 64 * 1024;

/** One text worker thread (text-worker.ts), started on first use and again after a crash, and the characters in flight on it. */
class TextThread {
  private readonly channel: WorkerChannel<TextRequest, TextReply>;
  /** Characters of the requests in flight. */
  chars = 0;

  constructor(source: TextSource) {
    this.channel = new WorkerChannel<TextRequest, TextReply>({
      start: () => startModuleWorker("text-worker", import.meta.url, { mark: TEXT_WORKER_MARK, source }),
      name: "the text worker",
      restart: true,
      lazy: true,
      settle: (reply) =>
        reply.ok ? { value: reply.value } : { error: reply.template ? new TemplateRenderError(reply.message) : new Error(reply.message) },
    });
  }

  async call<T>(op: Unnumbered<TextRequest>, chars: number): Promise<T> {
    this.chars += chars;
    try {
      return await this.channel.call<T>(op);
    } finally {
      this.chars -= chars;
    }
  }

  close(): Promise<void> {
    return this.channel.terminate();
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
  const call = <T>(op: Unnumbered<TextRequest>): Promise<T> => {
    const chars = textChars(op);
    const first = pool[0]!;
    const thread = first.chars < BUSY_CHARS ? first : pool.reduce((a, b) => (b.chars < a.chars ? b : a));
    return thread.call<T>(op, chars);
  };
  return {
    encode: (text) => call<number[]>({ op: "encode", text }),
    encodePrompt: (text) => call<number[]>({ op: "encodePrompt", text }),
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
