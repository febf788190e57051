import path from "node:path";
import type { Worker } from "node:worker_threads";
import { startModuleWorker } from "../module-worker.js";
import type { FrontierCommit } from "./frontier-rule.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { GRAMMAR_WORKER_MARK, type GrammarReply, type GrammarRequest, type GrammarWorkerData } from "./grammar-worker.js";
import type { GrammarOptions } from "./model-grammars.js";
import { SchemaError } from "./schema-check.js";
import type { ForcedCommit, GrammarRules, SequenceGrammar } from "./sequence-grammar.js";

type Pending = { resolve: (value: unknown) => void; reject: (err: Error) => void };
type Op = GrammarRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/**
 * The grammars of one model directory, compiled and matched on a worker thread of its own
 * (grammar-worker.ts). The worker keeps the process open only while a call is in flight; after
 * a crash the replies it was serving fail and the next reply starts a new one.
 */
export class GrammarWorker {
  private worker: Worker | undefined;
  private nextId = 1;
  private nextHandle = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly data: Omit<GrammarWorkerData, "mark">) {}

  /**
   * Compiles (or finds cached) the grammar of `spec` and starts a matcher for one reply;
   * SchemaError when the spec cannot be enforced. `onCompile` gets the compile's seconds when
   * this reply's grammar had to be compiled.
   */
  async start(
    spec: GrammarSpec,
    rules: GrammarRules,
    options: { freeUntil?: number; onCompile?: (seconds: number) => void } = {},
  ): Promise<SequenceGrammar> {
    const worker = this.running();
    const handle = this.nextHandle++;
    const { compileSeconds } = await this.call<{ compileSeconds?: number }>(worker, { op: "start", handle, spec, rules });
    if (compileSeconds !== undefined) options.onCompile?.(compileSeconds);
    return {
      step: (logits, offsets) => {
        // Only the rows from the frontier travel, copied once and transferred.
        const from = offsets[0]!;
        const rows = logits.slice(from, offsets.at(-1)! + rules.vocab);
        return this.call<FrontierCommit>(worker, { op: "step", handle, logits: rows, offsets: offsets.map((o) => o - from) }, [
          rows.buffer,
        ]);
      },
      forced: (room, replay) => this.call<ForcedCommit>(worker, { op: "forced", handle, room, replay: [...replay] }),
      dispose: () => {
        if (this.worker === worker) worker.postMessage({ op: "dispose", handle, id: 0 } satisfies GrammarRequest);
      },
      ...(options.freeUntil !== undefined ? { freeUntil: options.freeUntil } : {}),
    };
  }

  async close(): Promise<void> {
    const running = this.worker;
    this.worker = undefined;
    if (running !== undefined) await running.terminate();
  }

  private running(): Worker {
    if (this.worker !== undefined) return this.worker;
    const started = startModuleWorker("grammar-worker", { ...this.data, mark: GRAMMAR_WORKER_MARK }, import.meta.url);
    started.on("message", (reply: GrammarReply) => {
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) started.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(reply.schema ? new SchemaError(reply.message) : new Error(`grammar: ${reply.message}`));
    });
    started.on("error", (err) => this.failAll(err));
    started.on("exit", (code) => {
      if (this.worker === started) this.worker = undefined;
      this.failAll(new Error(`the grammar worker exited (code ${code})`));
    });
    started.unref();
    this.worker = started;
    return started;
  }

  private call<T>(worker: Worker, op: Op, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.worker !== worker) return Promise.reject(new Error("the grammar worker of this reply exited"));
    return new Promise<T>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.ref();
      worker.postMessage({ ...op, id }, transfer);
    });
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

const byDir = new Map<string, GrammarWorker>();

/** The grammar worker of the model in `dir` (one per directory, started on first use). */
export function grammarWorkerFor(dir: string, vocabSize: number, eosTokenId: number, options: GrammarOptions): GrammarWorker {
  const key = path.resolve(dir);
  let found = byDir.get(key);
  if (found === undefined) {
    const { cacheSize, compileBudgetMs, limits, tags } = options;
    found = new GrammarWorker({
      dir: key,
      vocabSize,
      eosTokenId,
      options: { cacheSize, compileBudgetMs, ...(limits !== undefined ? { limits } : {}), ...(tags !== undefined ? { tags } : {}) },
    });
    byDir.set(key, found);
  }
  return found;
}
