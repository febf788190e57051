import path from "node:path";
import { checkSpec, specKey, type GrammarSpec } from "./grammar-spec.js";
import { GrammarLane } from "./grammar-lane.js";
import type { GrammarWorkerData } from "./grammar-worker.js";
import type { GrammarOptions } from "./model-grammars.js";
import { SchemaError } from "./schema-check.js";
import type { GrammarRules, SequenceGrammar } from "./sequence-grammar.js";

/** How often a running compile's CPU time is read. */
const WATCH_MS = 50;
/** A compile that has not used its CPU budget is still stopped after this many budgets of wall time, and at least WALL_FLOOR_MS (a starved machine). */
const WALL_BUDGETS = 10;
const WALL_FLOOR_MS = 30_000;
/** How long a compile stopped at the budget stays refused (the machine may be less loaded later). */
export const BUDGET_REFUSAL_MS = 10 * 60_000;

type Refusal = { message: string; until: number };

export interface GrammarPoolOptions extends Omit<GrammarOptions, "onCompile"> {
  /** Most grammar worker threads (each compiles one grammar at a time, then serves its replies). */
  workers: number;
}

/**
 * The grammars of one model directory, on a pool of grammar worker threads (grammar-lane.ts).
 * XGrammar's WASM build cannot hand a compiled grammar to another thread, so a grammar's
 * matchers run on the thread that compiled it. Hence:
 * - a compile goes to a thread that serves no reply (started if there is none and the pool is
 *   below `workers`, else the compile waits for one), so the steps of running replies never
 *   wait behind a compile, and compiles run in parallel;
 * - the budget counts the compile's own CPU time (the thread's, from /proc), from when it
 *   starts on its thread: time waiting for a thread or for a CPU is not counted. At the budget
 *   the thread is terminated, which stops the compile and frees its memory;
 * - a reply whose grammar is compiled on some thread starts its matcher there;
 * - refusals are remembered by cause: a schema the grammar cannot take (deterministic) in a
 *   bounded map; a compile stopped at the budget for BUDGET_REFUSAL_MS;
 * - an abort of XGrammar's WASM code (e.g. on a schema it cannot convert) terminates the
 *   thread, whose WASM memory would otherwise stay grown, and the schema is a SchemaError.
 */
export class GrammarPool {
  private readonly lanes: GrammarLane[] = [];
  private readonly compiling = new Map<string, Promise<unknown>>();
  private readonly refusals = new Map<string, Refusal>();
  private readonly waiting: (() => void)[] = [];
  private readonly data: Omit<GrammarWorkerData, "mark">;

  constructor(
    data: Omit<GrammarWorkerData, "mark" | "options">,
    private readonly options: GrammarPoolOptions,
  ) {
    const { limits, tags, numberBounds } = options;
    // The pool keeps each thread's cache and the budget; the threads compile without either.
    this.data = {
      ...data,
      options: {
        cacheSize: Number.MAX_SAFE_INTEGER,
        compileBudgetMs: Number.POSITIVE_INFINITY,
        ...(limits !== undefined ? { limits } : {}),
        ...(tags !== undefined ? { tags } : {}),
        ...(numberBounds !== undefined ? { numberBounds } : {}),
      },
    };
  }

  /** Threads running now. */
  get size(): number {
    return this.lanes.length;
  }

  /**
   * Compiles (or finds compiled) the grammar of `spec` and starts a matcher for one reply;
   * SchemaError when the spec cannot be enforced or its compile ran past the budget.
   */
  async start(
    spec: GrammarSpec,
    rules: GrammarRules,
    options: { freeUntil?: number; onCompile?: (seconds: number) => void } = {},
  ): Promise<SequenceGrammar> {
    const key = specKey(spec);
    for (;;) {
      this.throwIfRefused(key);
      const lane = this.lanes.find((l) => l.keys.has(key) && !l.compiling);
      if (lane !== undefined) {
        lane.keys.delete(key);
        lane.keys.add(key);
        return lane.start(spec, rules, { ...options, onDispose: () => this.wake() });
      }
      const running = this.compiling.get(key);
      if (running === undefined) break;
      await running.catch(() => undefined);
    }
    checkSpec(spec, this.options.limits);
    const job = this.compileOnIdleLane(key, spec, rules, options);
    this.compiling.set(key, job);
    try {
      return await job;
    } finally {
      this.compiling.delete(key);
    }
  }

  async close(): Promise<void> {
    const lanes = this.lanes.splice(0);
    await Promise.all(lanes.map((lane) => lane.terminate()));
  }

  private async compileOnIdleLane(
    key: string,
    spec: GrammarSpec,
    rules: GrammarRules,
    options: { freeUntil?: number; onCompile?: (seconds: number) => void },
  ): Promise<SequenceGrammar> {
    const lane = await this.idleLane();
    try {
      await lane.ready();
    } catch (err) {
      // The thread could not load the vocabulary: not this schema's fault.
      lane.compiling = false;
      void lane.terminate();
      throw err;
    }
    try {
      const started = lane.start(spec, rules, { ...options, onDispose: () => this.wake() });
      const reply = await this.withinBudget(lane, key, started);
      lane.keys.add(key);
      this.trimCache(lane);
      return reply;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof SchemaError && !/Aborted\(/.test(message)) {
        if (!this.refusals.has(key)) this.refuse(key, message, Number.POSITIVE_INFINITY);
        throw err;
      }
      // An abort inside XGrammar, or the thread dying while it compiled this schema: the thread
      // goes (with the memory the abort left behind) and the schema is refused, never a 5xx.
      void lane.terminate();
      const refusal = `the grammar engine failed on this schema (${message.replace(/^grammar: /, "")}); it cannot be enforced`;
      this.refuse(key, refusal, Number.POSITIVE_INFINITY);
      throw new SchemaError(refusal);
    } finally {
      lane.compiling = false;
      this.wake();
    }
  }

  /** Waits for `started`; terminates the lane once its compile has used the budget. */
  private async withinBudget<T>(lane: GrammarLane, key: string, started: Promise<T>): Promise<T> {
    const budget = this.options.compileBudgetMs;
    const cpuAtStart = await lane.cpuMs();
    const wallAtStart = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const stopped = new Promise<never>((_, reject) => {
      timer = setInterval(async () => {
        const cpu = await lane.cpuMs();
        const wall = performance.now() - wallAtStart;
        const used = cpu !== undefined && cpuAtStart !== undefined ? cpu - cpuAtStart : wall;
        if (used <= budget && wall <= Math.max(budget * WALL_BUDGETS, WALL_FLOOR_MS)) return;
        clearInterval(timer);
        void lane.terminate();
        const message =
          `the schema's grammar did not compile within the budget of ${budget} ms (TESSERA_GRAMMAR_COMPILE_BUDGET_MS): ` +
          "stopped; long length or item bounds make the grammar large";
        this.refuse(key, message, Date.now() + BUDGET_REFUSAL_MS);
        reject(new SchemaError(message));
      }, WATCH_MS);
    });
    try {
      return await Promise.race([started, stopped]);
    } finally {
      clearInterval(timer);
    }
  }

  /** A lane that serves no reply and compiles nothing, marked compiling; waits when the pool is full. */
  private async idleLane(): Promise<GrammarLane> {
    for (;;) {
      let lane = this.lanes.find((l) => !l.compiling && l.live === 0 && !l.exited);
      if (lane === undefined && this.lanes.length < this.options.workers) {
        lane = new GrammarLane(this.data, (gone) => this.drop(gone));
        this.lanes.push(lane);
      }
      if (lane !== undefined) {
        lane.compiling = true;
        this.keepSpare();
        return lane;
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  /** Starts a thread ahead of need (it loads the vocabulary meanwhile) when none is free and the pool has room. */
  private keepSpare(): void {
    const free = this.lanes.some((l) => !l.compiling && l.live === 0 && !l.exited);
    if (!free && this.lanes.length < this.options.workers) this.lanes.push(new GrammarLane(this.data, (gone) => this.drop(gone)));
  }

  private trimCache(lane: GrammarLane): void {
    while (lane.keys.size > this.options.cacheSize) lane.evict(lane.keys.values().next().value as string);
  }

  private drop(lane: GrammarLane): void {
    const at = this.lanes.indexOf(lane);
    if (at >= 0) this.lanes.splice(at, 1);
    if (this.lanes.length > 0) this.keepSpare();
    this.wake();
  }

  private wake(): void {
    for (const resume of this.waiting.splice(0)) resume();
  }

  private throwIfRefused(key: string): void {
    const refusal = this.refusals.get(key);
    if (refusal === undefined) return;
    if (refusal.until > Date.now()) throw new SchemaError(refusal.message);
    this.refusals.delete(key);
  }

  private refuse(key: string, message: string, until: number): void {
    this.refusals.delete(key);
    this.refusals.set(key, { message, until });
    while (this.refusals.size > this.options.cacheSize) this.refusals.delete(this.refusals.keys().next().value as string);
  }
}

const byDir = new Map<string, GrammarPool>();

/** The grammar pool of the model in `dir` (one per directory; threads start on first use). */
export function grammarPoolFor(
  dir: string,
  vocabSize: number,
  eosTokenId: number,
  options: Omit<GrammarOptions, "onCompile"> & { workers?: number },
): GrammarPool {
  const key = path.resolve(dir);
  let found = byDir.get(key);
  if (found === undefined) {
    found = new GrammarPool({ dir: key, vocabSize, eosTokenId }, { ...options, workers: options.workers ?? DEFAULT_GRAMMAR_WORKERS });
    byDir.set(key, found);
  }
  return found;
}

/** Grammar threads per model by default: compiles in parallel beside the replies of the default 4 slots. */
export const DEFAULT_GRAMMAR_WORKERS = 6;
