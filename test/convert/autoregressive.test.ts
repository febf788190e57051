import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ForwardRunner } from "../../services/inference/decoder/forward.js";
import { loadModelDir } from "../../services/inference/engine/model-dir.js";
import { createModelRuntime, type ModelRuntime } from "../../services/inference/engine/runtime.js";
import { scoreSuffixes } from "../../services/inference/score/score.js";
import {
  type ConvertedFixtures,
  chatPrompt,
  convertedFixtures,
  HAVE_CONVERT_VENV,
  NO_VENV_MESSAGE,
  runConvertPython,
} from "../helpers/converted-models.js";
import { greedyTokens } from "../helpers/greedy-tokens.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const engines: ModelRuntime[] = [];
const scratch = mkdtempSync(join(tmpdir(), "tessera-ar-"));
afterAll(async () => {
  for (const e of engines) await e.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The engine on a converted model, with every forward's row length recorded. */
async function engineFor(dir: string): Promise<{ engine: ModelRuntime; rowLengths: number[] }> {
  const model = await loadModelDir(dir, { worker: false });
  const engine = createModelRuntime({ name: dir, servingIds: [], model, slots: 4, queue: 4 });
  const rowLengths: number[] = [];
  const runner = engine.runner as ForwardRunner;
  const run = runner.run.bind(runner);
  runner.run = (inputs, fetch, ...rest) => {
    rowLengths.push(inputs.seq);
    return (run as (...a: unknown[]) => ReturnType<ForwardRunner["run"]>)(inputs, fetch, ...rest);
  };
  engines.push(engine);
  return { engine, rowLengths };
}

interface Reference {
  generate?: number[][];
  labels?: { logit: number; logprob: number }[][];
}

async function reference(checkpoint: string, request: object): Promise<Reference> {
  const file = join(scratch, `request-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(request));
  const { stdout } = await runConvertPython(["convert/tests/ar_reference.py", checkpoint, file]);
  return JSON.parse(stdout) as Reference;
}

describe.skipIf(!HAVE_CONVERT_VENV)("plain autoregressive Qwen3 / Qwen2 checkpoints (block size 1)", () => {
  let fx: ConvertedFixtures;
  beforeAll(async () => {
    fx = await convertedFixtures();
  }, 600_000);

  for (const family of ["qwen3", "qwen2"] as const) {
    it(`${family}: converts as a causal model: block size 1, logits shift 1, no mask token of its own`, () => {
      const config = JSON.parse(readFileSync(join(fx.models[family], "config.json"), "utf8"));
      expect(config.model_type).toBe(family);
      expect(config.block_size).toBe(1);
      expect(config.logits_shift).toBe(1);
      expect(config.mask_token_id).toBe(config.pad_token_id);
      expect(config.stop_token_ids).toContain(config.pad_token_id);
    });

    it(`${family}: greedy replies equal transformers' generate token for token, one token per one-token forward`, async () => {
      const { engine, rowLengths } = await engineFor(fx.models[family]);
      const prompts = ["Hello! How can I help you today?", "The weather in Paris", "Options: A, B, C, D."].map((t) =>
        chatPrompt(engine, t),
      );
      prompts.push(engine.model.tokenizer.encode("the quick brown fox jumps over"));
      const maxTokens = 24;
      const config = JSON.parse(readFileSync(join(fx.models[family], "config.json"), "utf8"));
      const want = await reference(fx.checkpoints[family], {
        generate: { prompts, max_tokens: maxTokens, stops: config.stop_token_ids },
      });
      for (const [i, prompt] of prompts.entries()) {
        rowLengths.length = 0;
        const got = await greedyTokens(engine, prompt, maxTokens);
        expect(got).toEqual(want.generate![i]);
        // The prompt but its last token in one prefill; then a row of one token per reply token.
        expect(rowLengths[0]).toBe(prompt.length - 1);
        expect(rowLengths.slice(1).every((s) => s === 1)).toBe(true);
        expect(rowLengths.length - 1).toBe(Math.min(maxTokens, got.length + 1));
      }
      expect(want.generate!.some((r) => r.length >= 8)).toBe(true); // not only replies that stop at once
      // The replies' caches went back to the engine's pool, and replies in the other order reuse
      // stores that hold another reply's key/values: the tokens must not change.
      const pool = engine.decode.hostPool!;
      expect(pool.size).toBeGreaterThan(0);
      const given = new Set<Float32Array>();
      let reused = 0;
      const give = pool.give.bind(pool);
      const take = pool.take.bind(pool);
      pool.give = (store) => {
        for (const l of store) given.add(l.key);
        give(store);
      };
      pool.take = (layers, length) => {
        const store = take(layers, length);
        if (given.has(store[0]!.key)) reused++;
        return store;
      };
      for (const [i, prompt] of [...prompts.entries()].reverse()) {
        expect(await greedyTokens(engine, prompt, maxTokens)).toEqual(want.generate![i]);
      }
      expect(reused).toBeGreaterThan(0);
    });

    it(`${family}: a decision's label logits are transformers' next-token logits after the prompt`, async () => {
      const { engine } = await engineFor(fx.models[family]);
      const input = {
        prefix: "Order A-1092: chairs before the desk, delivery next week. ".repeat(3),
        suffixes: [
          { text: "Should this order be expedited?", labels: ["yes", "no"] },
          { text: "Which carrier?", labels: ["post", "courier", "freight"] },
        ],
      };
      const got = await scoreSuffixes(engine, input);
      const labels = [...new Set(input.suffixes.flatMap((s) => s.labels))];
      const ids = await engine.model.text.scoreTokens(
        input.prefix,
        input.suffixes.map((s) => s.text),
        labels,
      );
      const rows = ids.prompts.map((p) => [...ids.prefixIds.slice(0, p.common), ...p.rest]);
      const labelIds = (label: string) => ids.labelIds[labels.indexOf(label)]!;
      const want = await reference(fx.checkpoints[family], {
        labels: { rows, labels: input.suffixes.map((s) => s.labels.map(labelIds)) },
      });
      // A suffix of single-token labels reads raw logits at the slot; one with a longer label, log-probabilities.
      input.suffixes.forEach((s, i) => {
        const single = s.labels.every((l) => labelIds(l).length === 1);
        got.results[i]!.logits.forEach((v, j) => {
          const entry = want.labels![i]![j]!;
          expect(v).toBeCloseTo(single ? entry.logit : entry.logprob, 3);
        });
      });
    });
  }
});
