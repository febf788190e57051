import { readFileSync } from "node:fs";
import { startModuleWorker } from "../../../lib/module-worker.js";
import { type Unnumbered, WorkerChannel } from "../../../lib/worker-channel.js";
import type { FrontierCommit } from "./frontier-rule.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { GRAMMAR_WORKER_MARK, type GrammarReply, type GrammarRequest, type GrammarWorkerData } from "./grammar-worker.js";
import { SchemaError } from "./schema-check.js";
import type { ForcedCommit, GrammarRules, SequenceGrammar } from "./sequence-grammar.js";

/** Linux's clock ticks per second for /proc CPU times (USER_HZ, 100 on every architecture Node runs on). */
const TICKS_PER_SECOND = 100;

/**
 * One grammar worker thread (grammar-worker.ts) and what runs on it: the grammars it compiled
 * (by spec key, least recently used first) and the matchers of the replies it serves. The pool
 * (grammar-client.ts) compiles only on a lane that serves no reply, so a running reply's steps
 * never wait behind a compile, and terminates a lane whose compile runs past the budget. A
 * lane that exits fails the replies it served; the pool drops it.
 */
export class GrammarLane {
  /** Compiled grammars on the thread, by spec key, least recently used first. */
  readonly keys = new Set<string>();
  /** Replies whose matchers run here. */
  live = 0;
  /** A compile is running (or about to). */
  compiling = false;
  exited = false;
  private readonly channel: WorkerChannel<GrammarRequest, GrammarReply>;
  private readonly loaded: Promise<string | undefined>;
  private nextHandle = 1;

  constructor(data: Omit<GrammarWorkerData, "mark">, onExit: (lane: GrammarLane) => void) {
    this.channel = new WorkerChannel<GrammarRequest, GrammarReply>({
      start: () => startModuleWorker("grammar-worker", import.meta.url, { ...data, mark: GRAMMAR_WORKER_MARK }),
      name: "the grammar worker",
      settle: (reply) =>
        reply.ok
          ? { value: reply.value }
          : { error: reply.schema ? new SchemaError(reply.message) : new Error(`grammar: ${reply.message}`) },
      onExit: () => {
        this.exited = true;
        onExit(this);
      },
    });
    this.loaded = this.call<string | undefined>({ op: "load" });
    // A lane terminated before anyone awaited its load (a spare thread, a stopped compile) must
    // not leave an unhandled rejection behind; awaiters still see the error.
    this.loaded.catch(() => undefined);
  }

  /** Resolves once the thread has its vocabulary and compiler (not counted in any compile's budget). */
  async ready(): Promise<void> {
    await this.loaded;
  }

  /** CPU milliseconds the thread has used (undefined where /proc cannot tell). */
  async cpuMs(): Promise<number | undefined> {
    const file = await this.loaded.catch(() => undefined);
    if (file === undefined) return undefined;
    try {
      const fields = readFileSync(file, "utf8").split(") ")[1]!.split(" ");
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
    } catch {
      return undefined;
    }
  }

  /** Compiles (or finds compiled here) the grammar of `spec` and starts a matcher for one reply. */
  async start(
    spec: GrammarSpec,
    rules: GrammarRules,
    options: { freeUntil?: number; onCompile?: (seconds: number) => void; onDispose?: () => void } = {},
  ): Promise<SequenceGrammar> {
    const handle = this.nextHandle++;
    const { compileSeconds } = await this.call<{ compileSeconds?: number }>({ op: "start", handle, spec, rules });
    if (compileSeconds !== undefined) options.onCompile?.(compileSeconds);
    this.live++;
    let disposed = false;
    return {
      step: (logits, offsets) => {
        // Only the rows from the frontier travel, copied once and transferred.
        const from = offsets[0]!;
        const rows = logits.slice(from, offsets.at(-1)! + rules.vocab);
        return this.call<FrontierCommit>({ op: "step", handle, logits: rows, offsets: offsets.map((o) => o - from) }, [rows.buffer]);
      },
      forced: (room, replay) => this.call<ForcedCommit>({ op: "forced", handle, room, replay: [...replay] }),
      dispose: () => {
        if (disposed) return;
        disposed = true;
        this.live--;
        if (!this.exited) this.channel.post({ op: "dispose", handle, id: 0 });
        options.onDispose?.();
      },
      ...(options.freeUntil !== undefined ? { freeUntil: options.freeUntil } : {}),
    };
  }

  /** Drops a compiled grammar from the thread. */
  evict(key: string): void {
    this.keys.delete(key);
    if (!this.exited) void this.call({ op: "evict", key }).catch(() => undefined);
  }

  /** Stops the thread (a compile past its budget, an abort, shutdown): its WASM memory goes with it. */
  async terminate(): Promise<void> {
    this.exited = true;
    await this.channel.terminate();
  }

  private call<T>(op: Unnumbered<GrammarRequest>, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.exited) return Promise.reject(new Error("the grammar worker of this reply exited"));
    return this.channel.call<T>(op, transfer);
  }
}
