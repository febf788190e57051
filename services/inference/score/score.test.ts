// Score against the long way: the prefix encoded once (ids equal to encoding every whole
// prompt), logits equal to recomputing every prompt alone from position 0, and the same to
// the last bit whatever the other rows of the readout are.
import { existsSync } from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../../lib/logger.js";
import { InvalidRequest, PromptTooLong } from "../core/engine-errors.js";
import { loadModelDir } from "../engine/model-dir.js";
import { loadModelPool, type ModelPool } from "../engine/model-pool.js";
import { tokenizeScorePrompts } from "../prompt/score-tokens.js";
import { scoreSuffixes } from "./score.js";
import { ScoreTimer } from "./score-timing.js";
import { TINY_MODEL_DIR, fullForward, recordingRunner, type RecordedForward } from "../../../test/helpers/inference-engine.js";
import type { TextTokenizer } from "../prompt/tokenizer.js";

const BUNDLED_MODEL_DIR = path.resolve(TINY_MODEL_DIR, "../../../models/tessera-bd-small");
const TOKENIZER_DIRS = [TINY_MODEL_DIR, ...(existsSync(path.join(BUNDLED_MODEL_DIR, "tokenizer.json")) ? [BUNDLED_MODEL_DIR] : [])];

const PREFIX_HEAD = "<|im_start|>system\nAnswer the question about the state below.<|im_end|>\n<|im_start|>user\nState:\n";
/** The decision templates' question shapes (docs/model-contract.md). */
const QUESTIONS = [
  "\nQuestion: Is this ticket urgent?\nAnswer yes or no.<|im_end|>\n<|im_start|>assistant\n",
  "\nQuestion: Which team owns this?\nOptions:\n<|opt_0|> billing\n<|opt_1|> data platform: exports\nAnswer with the label of one option.<|im_end|>\n<|im_start|>assistant\n",
  "\nQuestion: Rate the state on this scale.\nLevels, lowest first:\n<|opt_0|> calm\n<|opt_1|> furious\nAnswer with the label of one level.<|im_end|>\n<|im_start|>assistant\n",
];
/** Pieces of states that end right before the seam in every awkward way. */
const STATE_PIECES = [
  "The export failed",
  " three times",
  ".",
  "!?",
  "  ",
  " ",
  "\n",
  "\n\n",
  "\t",
  "\r\n",
  "2019",
  "12345",
  "don't",
  "it's",
  "'",
  "é",
  "日本語",
  "😀",
  "\u00a0",
  "<|im_end|>",
  "<|opt_3|>",
  "<|im_",
  '{"a":[1,2]}',
];

/** Counts the encodes of long texts (the prefix or a whole prompt). */
function counting(tokenizer: TextTokenizer, longerThan: number) {
  const counter = {
    long: 0,
    tokenizer: {
      ...tokenizer,
      encode: (text: string) => {
        if (text.length > longerThan) counter.long++;
        return tokenizer.encode(text);
      },
    } satisfies TextTokenizer,
  };
  return counter;
}

describe("tokenizeScorePrompts", () => {
  for (const dir of TOKENIZER_DIRS) {
    describe(path.basename(dir), () => {
      let tokenizer: TextTokenizer;
      beforeAll(async () => {
        tokenizer = (await loadModelDir(dir)).tokenizer;
      });

      const expectWhole = (prefix: string, suffixes: string[]) => {
        const { prefixIds, prompts } = tokenizeScorePrompts(tokenizer, prefix, suffixes);
        expect(prefixIds).toEqual(tokenizer.encode(prefix));
        suffixes.forEach((suffix, i) => {
          const { common, rest } = prompts[i]!;
          expect([...prefixIds.slice(0, common), ...rest]).toEqual(tokenizer.encode(prefix + suffix));
        });
      };

      it("gives the ids of encoding each whole prompt, whatever the state ends with", () => {
        fc.assert(
          fc.property(
            fc.array(fc.oneof(fc.constantFrom(...STATE_PIECES), fc.string({ maxLength: 6 }), fc.string({ unit: "binary", maxLength: 3 })), {
              maxLength: 12,
            }),
            fc.array(
              fc.oneof(
                fc.constantFrom(...QUESTIONS),
                fc.string({ maxLength: 12 }),
                fc.constantFrom("\nA", "\n1", "\n'", "\n\n", "\n ", "x"),
              ),
              {
                minLength: 1,
                maxLength: 5,
              },
            ),
            (state, suffixes) => expectWhole(PREFIX_HEAD + state.join(""), suffixes),
          ),
          { numRuns: 300 },
        );
      });

      it("encodes the prefix once, not once per question", () => {
        const state = "The customer reports that the nightly export has failed three times this week. ".repeat(20);
        const prefix = PREFIX_HEAD + state;
        const counter = counting(tokenizer, state.length);
        const suffixes = [...QUESTIONS, ...QUESTIONS, ...QUESTIONS, ...QUESTIONS, ...QUESTIONS];
        const { prompts } = tokenizeScorePrompts(counter.tokenizer, prefix, suffixes);
        // The prefix, and one whole prompt that checks the seam on this request.
        expect(counter.long).toBe(2);
        suffixes.forEach((suffix, i) => {
          expect(prompts[i]).toEqual({ common: tokenizer.encode(prefix).length, rest: tokenizer.encode(suffix) });
        });
      });

      it("encodes whole the prompts whose suffix does not start a new line with a visible character", () => {
        const prefix = `${PREFIX_HEAD}It is late`;
        const counter = counting(tokenizer, prefix.length - 1);
        const suffixes = [" again.\nQuestion: Is it?", "\n  indented", QUESTIONS[0]!];
        expectWhole(prefix, suffixes);
        tokenizeScorePrompts(counter.tokenizer, prefix, suffixes);
        expect(counter.long).toBe(1 + 3); // the prefix, the two odd prompts, and the seam check
      });
    });
  }
});

describe("scoreSuffixes", () => {
  let pool: ModelPool;
  let forwards: RecordedForward[] = [];
  beforeAll(async () => {
    pool = await loadModelPool({
      models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }],
      slots: 2,
      queue: 2,
      intraOpThreads: 1,
      // Some tests here ask many long questions: more than the default cap on a request's work.
      maxScoreWorkTokens: 1_000_000,
      logger: silentLogger(),
      wrapRunner: (inner) => {
        const r = recordingRunner(inner);
        forwards = r.forwards;
        return r;
      },
    });
  });
  afterAll(async () => {
    await pool?.close();
  });

  /** log-softmax (or the raw logit) of each label read the long way: every prompt alone from position 0. */
  async function recomputed(prefix: string, suffix: string, labels: readonly string[]): Promise<number[]> {
    const engine = pool.runtime("tiny")!;
    const { tokenizer, config } = engine.model;
    const V = config.vocabSize;
    const ids = labels.map((l) => tokenizer.encode(l));
    const single = ids.every((t) => t.length === 1);
    const prompt = tokenizer.encode(prefix + suffix);
    const values: number[] = [];
    for (const label of ids) {
      let value = 0;
      for (let k = 0; k < label.length; k++) {
        const tokens = [...prompt, ...label.slice(0, k), ...new Array<number>(label.length - k).fill(config.maskTokenId)];
        const out = await fullForward(engine.model, engine.runner, tokens);
        const at = prompt.length + k;
        const row = out.logits!.subarray(at * V, (at + 1) * V);
        const max = Math.max(...row);
        const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
        value += single ? row[label[k]!]! : row[label[k]!]! - lse;
      }
      values.push(value);
    }
    return values;
  }

  it("equals recomputing each prompt alone, for many questions of very different lengths", async () => {
    const engine = pool.runtime("tiny")!;
    const prefix = PREFIX_HEAD + "The invoice is 90 days overdue and the customer has not answered. ".repeat(6);
    // Rows of very different lengths (one question with a long option list), and multi-token labels (a row per filled token).
    const suffixes = Array.from({ length: 30 }, (_, i) => ({
      text: QUESTIONS[i % 3]!.replace("Question:", i === 7 ? `Question ${i}: ${"which one? ".repeat(40)}` : `Question ${i}:`),
      labels: i % 4 === 0 ? ["pay now", "<|opt_1|>", "sue them"] : i % 3 === 0 ? ["<|yes|>", "<|no|>"] : ["<|opt_0|>", "<|opt_1|>"],
    }));
    const before = forwards.length;
    const out = await scoreSuffixes(engine, { prefix, suffixes });
    const readouts = forwards.slice(before).filter((f) => !f.fetch.present);
    // Every question, multi-token labels included, in a few forwards of rows of similar length.
    expect(readouts.length).toBeGreaterThan(1);
    expect(readouts.length).toBeLessThan(suffixes.length);
    // Rows over the state's past share forwards; a question with multi-token labels reads on
    // from its own complete blocks, computed once for its rows.
    const statePast = Math.min(...readouts.map((f) => f.past));
    expect(readouts.filter((f) => f.past === statePast).reduce((rows, f) => rows + f.batch, 0)).toBeGreaterThan(15);
    for (const [i, s] of suffixes.entries()) {
      const want = await recomputed(prefix, s.text, s.labels);
      out.results[i]!.logits.forEach((got, j) => {
        expect(got).toBeCloseTo(want[j]!, 4);
      });
    }
  });

  it("cuts a row longer than a forward into chunks over the cache, equal to one unchunked forward (any chunk size)", async () => {
    const engine = pool.runtime("tiny")!;
    const option = (i: number) => `<|opt_${i % 128}|> option ${i}${i % 3 === 0 ? ": a short description" : ""}\n`;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 64, max: 1100 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 10, max: 128 }),
        fc.boolean(),
        async (rowCap, sentences, options, multiToken) => {
          const prefix = PREFIX_HEAD + "The parcel came late. ".repeat(sentences);
          const text = `\nQuestion: Which one?\nOptions:\n${Array.from({ length: options }, (_, i) => option(i)).join("")}Answer with the label of one option.<|im_end|>\n<|im_start|>assistant\n`;
          const labels = multiToken ? ["<|opt_0|>", "pay now", "sue them"] : ["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"];
          const capped = { ...engine, maxScoreRowTokens: rowCap };
          const before = forwards.length;
          const out = await scoreSuffixes(capped, { prefix, suffixes: [{ text, labels }] });
          const own = forwards.slice(before);
          // No forward holds more than the cap, or one block and the answer span where the cap is smaller.
          for (const f of own) expect(f.batch * f.seq).toBeLessThanOrEqual(Math.max(rowCap, 64 + 3));
          const want = await recomputed(prefix, text, labels);
          out.results[0]!.logits.forEach((got, j) => {
            expect(Math.abs(got - want[j]!)).toBeLessThan(1e-5);
          });
        },
      ),
      { numRuns: 8 },
    );
  });

  it("equals recomputing each prompt alone when the prefix is shorter than a block", async () => {
    const engine = pool.runtime("tiny")!;
    const prefix = "<|im_start|>user\nState:\nok";
    const suffixes = QUESTIONS.map((text) => ({ text, labels: ["<|yes|>", "<|no|>", "<|opt_0|>"] }));
    const before = forwards.length;
    const out = await scoreSuffixes(engine, { prefix, suffixes });
    const readouts = forwards.slice(before);
    expect(readouts.every((f) => f.past === 0 && !f.fetch.present)).toBe(true); // no prefill: nothing to reuse
    expect(readouts.reduce((rows, f) => rows + f.batch, 0)).toBe(3);
    for (const [i, s] of suffixes.entries()) {
      const want = await recomputed(prefix, s.text, s.labels);
      out.results[i]!.logits.forEach((got, j) => {
        expect(got).toBeCloseTo(want[j]!, 4);
      });
    }
  });

  it("gives each suffix the same values to the last bit alone, among others and in any order", async () => {
    const engine = pool.runtime("tiny")!;
    const prefix = PREFIX_HEAD + "Two other tickets mention slow uploads during the same hours. ".repeat(8);
    const all = QUESTIONS.map((text, i) => ({ text, labels: i === 1 ? ["<|opt_0|>", "data platform"] : ["<|opt_0|>", "<|opt_1|>"] }));
    const extra = {
      text: `\nQuestion: ${"and more? ".repeat(30)}\nAnswer yes or no.<|im_end|>\n<|im_start|>assistant\n`,
      labels: ["<|yes|>", "<|no|>"],
    };
    const together = await scoreSuffixes(engine, { prefix, suffixes: [...all].reverse() });
    const added = await scoreSuffixes(engine, { prefix, suffixes: [extra, ...all] });
    for (const [i, s] of all.entries()) {
      const alone = await scoreSuffixes(engine, { prefix, suffixes: [s] });
      expect(together.results[all.length - 1 - i]!.logits).toEqual(alone.results[0]!.logits);
      expect(added.results[i + 1]!.logits).toEqual(alone.results[0]!.logits);
    }
  });

  it("prefills the prefix without the output head, and gives the same bits as a prefill that computes it", async () => {
    const prefix = PREFIX_HEAD + "The customer asks for a call with an engineer. ".repeat(20);
    const suffixes = QUESTIONS.map((text, i) => ({ text, labels: i === 1 ? ["<|opt_0|>", "data platform"] : ["<|yes|>", "<|no|>"] }));
    const before = forwards.length;
    const skipped = await scoreSuffixes(pool.runtime("tiny")!, { prefix, suffixes });
    const prefills = forwards.slice(before).filter((f) => f.fetch.present);
    expect(prefills.length).toBeGreaterThan(0);
    expect(prefills.every((f) => f.fetch.output === "none")).toBe(true);
    // The old way: the prefill asks for the readout, so ONNX Runtime computes the head.
    const withHead = await loadModelPool({
      models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }],
      slots: 1,
      queue: 1,
      intraOpThreads: 1,
      wrapRunner: (inner) => ({
        run: (inputs, fetch) => inner.run(inputs, fetch.output === "none" ? { ...fetch, output: "readout" } : fetch),
      }),
    });
    try {
      expect(await scoreSuffixes(withHead.runtime("tiny")!, { prefix, suffixes })).toEqual(skipped);
    } finally {
      await withHead.close();
    }
  });

  it("gives the same bits on a worker-thread session, which writes the past's rows itself, as on this thread", async () => {
    const prefix = PREFIX_HEAD + "The nightly export failed again after thirty minutes. ".repeat(12);
    const suffixes = QUESTIONS.map((text, i) => ({
      text,
      labels: i === 2 ? ["<|opt_0|>", "pay now"] : ["<|opt_0|>", "<|opt_1|>", "<|yes|>"],
    }));
    const pools = await Promise.all(
      [true, false].map((ortWorker) =>
        loadModelPool({ models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }], slots: 1, queue: 1, intraOpThreads: 1, ortWorker }),
      ),
    );
    try {
      const timer = new ScoreTimer();
      const [onWorker, inThread] = await Promise.all(
        pools.map((p, i) => scoreSuffixes(p.runtime("tiny")!, { prefix, suffixes }, undefined, i === 0 ? timer : undefined)),
      );
      expect(onWorker!.prefixTokens).toBeGreaterThan(64); // a prefill, so a past to repeat
      expect(onWorker).toEqual(inThread);
      // Where the time went (the debug log's "score timing"): the state's blocks once, then the rows over them.
      const { prefill, rows, totalMs, tokenizeMs } = timer.timing;
      const stateBlocks = Math.floor(onWorker!.prefixTokens / 64) * 64;
      expect(prefill.forwards).toBeGreaterThanOrEqual(1);
      expect(prefill.tokens).toBeGreaterThanOrEqual(stateBlocks); // padding included
      expect(rows.forwards).toBeGreaterThanOrEqual(1);
      expect(rows.past).toBeGreaterThanOrEqual(rows.forwards * stateBlocks); // a question with blocks of its own reads over them too
      for (const f of [prefill, rows]) expect(f.runMs + f.fillMs).toBeLessThanOrEqual(f.wallMs + 1);
      expect(totalMs).toBeGreaterThanOrEqual(tokenizeMs + prefill.wallMs + rows.wallMs);
      // A row cut into chunks (a past of its own) too.
      const long = [...suffixes, { text: `\nWhich one? ${"one of many options, ".repeat(40)}`, labels: ["<|opt_0|>", "pay now"] }];
      const [cutOnWorker, cutInThread] = await Promise.all(
        pools.map((p) => scoreSuffixes({ ...p.runtime("tiny")!, maxScoreRowTokens: 128 }, { prefix, suffixes: long })),
      );
      expect(cutOnWorker).toEqual(cutInThread);
      // Another state with as many complete blocks takes the first one's shared memory again
      // (sharedPast's pool): the worker must write its rows afresh, not keep the old state's.
      const sentences = [
        "The weekly import stalled once more after ten minutes. ",
        "The nightly import failed again after forty minutes. ",
        "The nightly export stopped again after thirty seconds. ",
        "A nightly export failed again after thirty minutes. ",
      ];
      let other: { prefix: string; onWorker: unknown; inThread: unknown } | undefined;
      for (const sentence of sentences) {
        const prefix = PREFIX_HEAD + sentence.repeat(12);
        const [w, t] = await Promise.all(pools.map((p) => scoreSuffixes(p.runtime("tiny")!, { prefix, suffixes })));
        expect(w).toEqual(t);
        if (Math.floor(w!.prefixTokens / 64) === Math.floor(onWorker!.prefixTokens / 64)) {
          other = { prefix, onWorker: w, inThread: t };
          break;
        }
      }
      expect(other).toBeDefined();
      expect(other!.onWorker).not.toEqual(onWorker);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });
});

describe("scoreSuffixes under the work cap", () => {
  let pool: ModelPool;
  beforeAll(async () => {
    pool = await loadModelPool({
      models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }],
      slots: 1,
      queue: 1,
      intraOpThreads: 1,
      maxScoreWorkTokens: 300,
      logger: silentLogger(),
    });
  });
  afterAll(async () => {
    await pool?.close();
  });

  it("refuses a request whose work passes the cap, naming the setting, before any forward", async () => {
    const engine = pool.runtime("tiny")!;
    const suffixes = Array.from({ length: 20 }, (_, i) => ({ text: `\nQuestion ${i}: is this about the weather?`, labels: ["yes", "no"] }));
    const err = await scoreSuffixes(engine, { prefix: "State: it rains.", suffixes }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidRequest);
    expect((err as Error).message).toMatch(/at most 300 \(TESSERA_MAX_DECISION_WORK_TOKENS\)/);
    // Within the cap it answers.
    const ok = await scoreSuffixes(engine, { prefix: "State: it rains.", suffixes: suffixes.slice(0, 2) });
    expect(ok.results).toHaveLength(2);
  });

  it("refuses a state that cannot fit the context from its byte length, before tokenizing", async () => {
    const engine = pool.runtime("tiny")!;
    const bytes = engine.model.maxTokenBytes * engine.decode.maxPositions;
    const started = performance.now();
    const err = await scoreSuffixes(engine, { prefix: "x".repeat(bytes), suffixes: [{ text: "\nQ?", labels: ["yes"] }] }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PromptTooLong);
    expect((err as Error).message).toMatch(/prompt too long: the state has \d+ bytes of text/);
    expect(performance.now() - started).toBeLessThan(200);
  });
});

describe("scoreSuffixes under the row cap", () => {
  let capped: ModelPool;
  let free: ModelPool;
  let forwards: RecordedForward[] = [];
  beforeAll(async () => {
    const options = { slots: 1, queue: 1, intraOpThreads: 1, logger: silentLogger() };
    capped = await loadModelPool({
      models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }],
      maxScoreRowTokens: 128,
      ...options,
      wrapRunner: (inner) => {
        const r = recordingRunner(inner);
        forwards = r.forwards;
        return r;
      },
    });
    free = await loadModelPool({ models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }], maxScoreRowTokens: 4096, ...options });
  });
  afterAll(async () => {
    await Promise.all([capped?.close(), free?.close()]);
  });

  it("answers a question whose row passes the cap in forwards of at most the cap, as without a cap", async () => {
    const long = { text: `\nWhich one? ${"one of many options, ".repeat(40)}`, labels: ["a", "b"] };
    const prefix = `State: ${"the weather report says it rains in the north. ".repeat(40)}`;
    for (const suffixes of [[long], [{ text: "\nIs it raining?", labels: ["yes", "no"] }, long]]) {
      const before = forwards.length;
      const [a, b] = await Promise.all([
        scoreSuffixes(capped.runtime("tiny")!, { prefix, suffixes }),
        scoreSuffixes(free.runtime("tiny")!, { prefix, suffixes }),
      ]);
      expect(a.prefixTokens).toBeGreaterThan(256);
      expect(forwards.length - before).toBeGreaterThan(3);
      for (const f of forwards.slice(before)) expect(f.batch * f.seq).toBeLessThanOrEqual(128);
      a.results.forEach((r, i) => {
        r.logits.forEach((logit, j) => {
          expect(Math.abs(logit - b.results[i]!.logits[j]!)).toBeLessThan(1e-5);
        });
      });
      expect(a.inputTokens).toBe(b.inputTokens);
    }
  });

  it("refuses a question that does not fit the model's context, naming the context", async () => {
    const huge = { text: `\nWhich one? ${"one of many options, ".repeat(600)}`, labels: ["a", "b"] };
    const err = await scoreSuffixes(free.runtime("tiny")!, { prefix: "State: it rains.", suffixes: [huge] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidRequest);
    expect((err as Error).message).toMatch(
      /prompt too long: the state and suffixes\[0\] need \d+ tokens .*the context of model "tiny-model" is 2048 tokens/,
    );
  });
});
