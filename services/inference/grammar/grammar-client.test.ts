// The grammar worker thread with the bundled model's vocabulary: a reply's grammar works across
// the thread boundary, refusals arrive as SchemaError, a crash fails only the replies it was
// serving, and a slow compile does not hold the event loop.
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BUNDLED_MODEL_DIR } from "../../../test/helpers/tessera.js";
import { createTextTokenizer } from "../prompt/tokenizer.js";
import { GrammarPool } from "./grammar-client.js";
import { SchemaError } from "./schema-check.js";

const read = (name: string) => JSON.parse(readFileSync(path.join(BUNDLED_MODEL_DIR, name), "utf8"));
const config = read("config.json");
const VOCAB: number = config.vocab_size;
const EOS: number = config.eos_token_id;
const tokenizer = createTextTokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
const rules = { threshold: 0.9, vocab: VOCAB, banned: [config.mask_token_id] };
const worker = new GrammarPool(
  { dir: BUNDLED_MODEL_DIR, vocabSize: VOCAB, eosTokenId: EOS },
  { cacheSize: 8, compileBudgetMs: 60_000, workers: 2 },
);

afterAll(() => worker.close());

/** Logits that put `logit` on `token` at each position, 0 elsewhere. */
function logitsFor(tokens: readonly number[], logit = 20): Float32Array {
  const out = new Float32Array(tokens.length * VOCAB);
  for (const [i, t] of tokens.entries()) out[i * VOCAB + t] = logit;
  return out;
}

describe("GrammarPool", () => {
  it("decodes a reply under its grammar across the thread: forced text, guesses, the end", async () => {
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    let compiled: number | undefined;
    const g = await worker.start({ kind: "json_schema", schema }, rules, { onCompile: (s) => (compiled = s) });
    expect(compiled).toBeGreaterThan(0);
    const forced = await g.forced(64, []);
    expect(tokenizer.decode(forced.tokens)).toBe('{"ok": ');
    expect(forced.forced).toBe(forced.tokens.length);
    // The model is sure of "true"; the rest (the brace, the end of turn) is forced.
    const want = tokenizer.encode("true");
    const step = await g.step(
      logitsFor([...want, 0, 0, 0]),
      [0, 1, 2, 3].map((i) => i * VOCAB),
    );
    expect(tokenizer.decode(step.tokens.filter((t) => t !== EOS))).toBe("true}");
    expect(step.tokens.at(-1)).toBe(EOS);
    g.dispose();
  });

  it("a second reply of the same schema reuses the compiled grammar", async () => {
    let compiled = 0;
    const spec = { kind: "json_object" as const };
    (await worker.start(spec, rules, { onCompile: () => compiled++ })).dispose();
    (await worker.start(spec, rules, { onCompile: () => compiled++ })).dispose();
    expect(compiled).toBe(1);
  });

  it("replays tokens from the thinking span's end as far as the grammar accepts them", async () => {
    const g = await worker.start({ kind: "json_object" }, rules);
    const replay = tokenizer.encode('{"a": 1} trailing');
    const out = await g.forced(64, replay);
    expect(out.replayed).toBe(tokenizer.encode('{"a": 1}').length);
    expect(tokenizer.decode(out.tokens.slice(0, out.replayed))).toBe('{"a": 1}');
    g.dispose();
  });

  it("a schema the grammar cannot enforce is a SchemaError naming the keyword", async () => {
    const bad = worker.start({ kind: "json_schema", schema: { type: "integer", multipleOf: 3 } }, rules);
    await expect(bad).rejects.toBeInstanceOf(SchemaError);
    await expect(bad).rejects.toThrow(/multipleOf/);
  });

  it("after a crash the replies it served fail, and the next reply starts a new worker", async () => {
    const g = await worker.start({ kind: "json_object" }, rules);
    await worker.close();
    await expect(g.forced(64, [])).rejects.toThrow(/grammar worker/);
    const again = await worker.start({ kind: "json_object" }, rules);
    expect(tokenizer.decode((await again.forced(64, [])).tokens)).toBe("{");
    again.dispose();
  });

  it("a slow compile runs off the event loop: timers keep firing", async () => {
    // Long length bounds are XGrammar's slow case (seconds on this vocabulary, bench/grammar.ts).
    const schema = {
      type: "object",
      properties: { a: { type: "string", maxLength: 200 }, b: { type: "string", maxLength: 150 } },
      required: ["a", "b"],
      additionalProperties: false,
    };
    let compileMs = 0;
    let last = performance.now();
    let longestGap = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      longestGap = Math.max(longestGap, now - last);
      last = now;
    }, 5);
    try {
      const g = await worker.start({ kind: "json_schema", schema }, rules, { onCompile: (s) => (compileMs = s * 1000) });
      g.dispose();
      // A stall would end in microtasks: let the timer see it before stopping it.
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      clearInterval(timer);
    }
    expect(compileMs).toBeGreaterThan(300);
    expect(longestGap).toBeLessThan(compileMs / 3);
  }, 60_000);

  it("stops a compile at its CPU budget (the thread terminated), remembers the refusal, and running replies never wait", async () => {
    const pool = new GrammarPool(
      { dir: BUNDLED_MODEL_DIR, vocabSize: VOCAB, eosTokenId: EOS },
      { cacheSize: 8, compileBudgetMs: 300, workers: 3 },
    );
    try {
      const running = await pool.start({ kind: "json_object" }, rules);
      const slow = {
        type: "object",
        properties: { a: { type: "string", maxLength: 256 }, b: { type: "string", maxLength: 250 } },
        required: ["a", "b"],
        additionalProperties: false,
      };
      const refused = pool.start({ kind: "json_schema", schema: slow }, rules);
      // One thread serves the running reply, one compiles, one is kept spare.
      expect(pool.size).toBe(3);
      // The running reply's calls are answered while the other thread compiles.
      let slowestMs = 0;
      const done = refused.catch(() => undefined);
      let settled = false;
      void done.then(() => (settled = true));
      while (!settled) {
        const t = performance.now();
        await running.forced(1, []);
        slowestMs = Math.max(slowestMs, performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
      await expect(refused).rejects.toBeInstanceOf(SchemaError);
      await expect(refused).rejects.toThrow(/did not compile within the budget of 300 ms/);
      expect(slowestMs).toBeLessThan(250);
      // The terminated thread's exit arrives when it arrives (later on a loaded machine).
      await expect.poll(() => pool.size, { timeout: 10_000 }).toBe(2);
      // Remembered: refused at once, no thread started.
      const t = performance.now();
      await expect(pool.start({ kind: "json_schema", schema: slow }, rules)).rejects.toThrow(/within the budget/);
      expect(performance.now() - t).toBeLessThan(50);
      expect(pool.size).toBe(2);
      running.dispose();
    } finally {
      await pool.close();
    }
  }, 60_000);
});
