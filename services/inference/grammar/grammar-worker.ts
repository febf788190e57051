// A grammar worker thread: XGrammar (its WASM build) compiles grammars and runs the matchers
// of constrained replies here, so a slow compile (a schema with long length bounds takes
// seconds) and each step's masks never hold the event loop. A compiled grammar cannot leave
// the thread it was compiled on, so the matchers of a grammar run where it was compiled. The
// main side is grammar-lane.ts (one worker) and grammar-client.ts (the pool of them).
import { readlinkSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parentPort, workerData } from "node:worker_threads";
import { createTextTokenizer } from "../prompt/tokenizer.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { localSequenceGrammar } from "./local-grammar.js";
import { replyGuard } from "./loop-guard.js";
import { MatcherState } from "./matcher-state.js";
import { ModelGrammars, type GrammarOptions } from "./model-grammars.js";
import { SchemaError } from "./schema-check.js";
import type { GrammarRules, SequenceGrammar } from "./sequence-grammar.js";
import { Utf8CheckedState } from "./utf8-state.js";

export const GRAMMAR_WORKER_MARK = "tessera-grammar-worker";

export interface GrammarWorkerData {
  mark: string;
  dir: string;
  vocabSize: number;
  eosTokenId: number;
  options: Omit<GrammarOptions, "onCompile">;
}

export type GrammarRequest =
  | { id: number; op: "load" }
  | { id: number; op: "evict"; key: string }
  | { id: number; op: "start"; handle: number; spec: GrammarSpec; rules: GrammarRules }
  | { id: number; op: "step"; handle: number; logits: Float32Array; offsets: number[] }
  | { id: number; op: "forced"; handle: number; room: number; replay: number[] }
  | { id: number; op: "dispose"; handle: number };

export type GrammarReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; schema: boolean; message: string };

async function load(data: GrammarWorkerData) {
  const [tokenizerJson, tokenizerConfig] = await Promise.all(
    ["tokenizer.json", "tokenizer_config.json"].map(
      async (name) => JSON.parse(await readFile(path.join(data.dir, name), "utf8")) as object,
    ),
  );
  const tokenizer = createTextTokenizer(tokenizerJson!, tokenizerConfig!);
  const grammars = await ModelGrammars.create(tokenizerJson, data.vocabSize, data.eosTokenId, data.options);
  return { tokenizer, grammars };
}

/** This thread's /proc stat file (its CPU time), or undefined off Linux. */
function threadStat(): string | undefined {
  try {
    return `/proc/${readlinkSync("/proc/thread-self")}/stat`;
  } catch {
    return undefined;
  }
}

const data = workerData as GrammarWorkerData | undefined;
if (parentPort !== null && data?.mark === GRAMMAR_WORKER_MARK) {
  const port = parentPort;
  const loaded = load(data);
  const replies = new Map<number, SequenceGrammar>();

  async function answer(req: GrammarRequest): Promise<unknown> {
    const { tokenizer, grammars } = await loaded;
    if (req.op === "load") return threadStat();
    if (req.op === "evict") return grammars.evict(req.key);
    if (req.op === "start") {
      let seconds: number | undefined;
      const compiled = await grammars.compile(req.spec, (s) => (seconds = s));
      const state = new Utf8CheckedState(new MatcherState(await grammars.matcher(compiled)), grammars.tokenBytes);
      replies.set(
        req.handle,
        localSequenceGrammar(state, tokenizer.encode, req.rules, undefined, replyGuard(req.spec, req.rules, grammars)),
      );
      return { compileSeconds: seconds };
    }
    if (req.op === "dispose") {
      replies.get(req.handle)?.dispose();
      replies.delete(req.handle);
      return undefined;
    }
    const reply = replies.get(req.handle);
    if (reply === undefined) throw new Error(`no grammar ${req.handle} on the grammar worker`);
    return req.op === "step" ? reply.step(req.logits, req.offsets) : reply.forced(req.room, req.replay);
  }

  port.on("message", (req: GrammarRequest) => {
    answer(req).then(
      (value) => req.op !== "dispose" && port.postMessage({ id: req.id, ok: true, value } satisfies GrammarReply),
      (err: unknown) =>
        req.op !== "dispose" &&
        port.postMessage({
          id: req.id,
          ok: false,
          schema: err instanceof SchemaError,
          message: err instanceof Error ? err.message : String(err),
        } satisfies GrammarReply),
    );
  });
}
