// How long the event loop stalls while a slow grammar compiles: XGrammar on the calling thread
// (ModelGrammars, as before the grammar worker) against the grammar worker thread
// (GrammarWorker, as the server runs it). The longest gap between 5 ms timer ticks during
// each compile, for schemas with long string bounds (XGrammar's slow case); the ratio is
// the figure (both measured in the same run).
//
//   npx tsx bench/grammar-event-loop.ts [model-dir]   (default: models/tessera-bd-small)
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GrammarPool } from "../services/inference/grammar/grammar-client.js";
import { ModelGrammars } from "../services/inference/grammar/model-grammars.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = process.argv[2] ?? path.join(ROOT, "models", "tessera-bd-small");

/** The longest gap between ticks of a 5 ms timer while `work` runs, and how long it ran. */
async function stallDuring(work: () => Promise<unknown>): Promise<{ gapMs: number; ms: number }> {
  let last = performance.now();
  let gapMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    gapMs = Math.max(gapMs, now - last);
    last = now;
  }, 5);
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 20));
  let ms = 0;
  try {
    await work();
    ms = performance.now() - started - 20;
    // A stall ends in microtasks (the awaits above): let the timer see it before stopping it.
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    clearInterval(timer);
  }
  return { gapMs, ms };
}

const schemaOf = (bound: number, round: string) => ({
  title: round,
  type: "object",
  properties: { a: { type: "string", maxLength: bound }, b: { type: "string", maxLength: Math.round(bound / 2) } },
  required: ["a", "b"],
  additionalProperties: false,
});

async function main(): Promise<void> {
  const config = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"));
  const tokenizerJson = JSON.parse(await readFile(path.join(dir, "tokenizer.json"), "utf8"));
  const options = { cacheSize: 4, compileBudgetMs: 60_000 };
  const inThread = await ModelGrammars.create(tokenizerJson, config.vocab_size, config.eos_token_id, options);
  const worker = new GrammarPool({ dir, vocabSize: config.vocab_size, eosTokenId: config.eos_token_id }, { ...options, workers: 2 });
  const rules = { threshold: 0.9, vocab: config.vocab_size, banned: [] };
  (await worker.start({ kind: "json_object" }, rules)).dispose(); // the worker is up

  console.log(`model ${path.basename(dir)}, vocabulary ${config.vocab_size}\n`);
  console.log("| string bound | compile on the event loop: ms, longest stall | on the grammar worker: ms, longest stall | stall ratio |");
  console.log("| ---: | ---: | ---: | ---: |");
  for (const bound of [32, 100, 200]) {
    const a = await stallDuring(async () => {
      const matcher = await inThread.matcher(await inThread.compile({ kind: "json_schema", schema: schemaOf(bound, "thread") }));
      await matcher.getNextTokenBitmask();
      matcher.dispose();
    });
    const b = await stallDuring(async () =>
      (await worker.start({ kind: "json_schema", schema: schemaOf(bound, "worker") }, rules)).dispose(),
    );
    console.log(
      `| ${bound} | ${a.ms.toFixed(0)} ms, ${a.gapMs.toFixed(0)} ms | ${b.ms.toFixed(0)} ms, ${b.gapMs.toFixed(0)} ms | ${(a.gapMs / b.gapMs).toFixed(0)}× |`,
    );
  }
  await worker.close();
}

await main();
