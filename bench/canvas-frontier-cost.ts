// The grammar's own work per committed position at the 26B DiffusionGemma's vocabulary (262,144):
// the masked guess of the frontier rule (grammar/frontier-rule.ts maskedGuess: the allowed
// token with the highest logit and its renormalised probability) and the copy of one position's
// logits to the grammar thread (decoder/canvas/canvas-frontier.ts hands the grammar at most
// FRONTIER_WINDOW positions a step). XGrammar's own mask at that vocabulary needs Gemma's tokenizer, which is
// not here: bench/grammar.ts measures it on the vocabularies that are.
//
//   npx tsx bench/canvas-frontier-cost.ts [vocab]
import { FRONTIER_WINDOW } from "../services/inference/decoder/canvas/canvas-frontier.js";
import { maskedGuess } from "../services/inference/grammar/frontier-rule.js";

const V = Number(process.argv[2] ?? 262_144);
const logits = Float32Array.from({ length: V }, () => Math.random() * 20 - 10);
const banned = new Uint8Array(V);
const words = Math.ceil(V / 32);
// Inside a JSON string almost every token is allowed; after a key only a handful are.
const dense = new Int32Array(words).fill(-1);
const sparse = new Int32Array(words);
for (let i = 0; i < 16; i++) sparse[(i * 4099) % words]! |= 1 << (i % 32);

/** The best of 5 rounds' mean (a shared machine's load only ever adds time). */
function time(label: string, run: () => void, n = 20): number {
  for (let i = 0; i < 20; i++) run();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) run();
    best = Math.min(best, (performance.now() - t0) / n);
  }
  console.log(`${label}: ${best.toFixed(3)} ms`);
  return best;
}

console.log(`vocabulary ${V}`);
time("masked guess, every token allowed (inside a string)", () => maskedGuess(logits, 0, V, banned, dense));
time("masked guess, 16 tokens allowed", () => maskedGuess(logits, 0, V, banned, sparse));
const many = new Float32Array(V * FRONTIER_WINDOW);
const target = new Float32Array(V * FRONTIER_WINDOW);
time(`copy of ${FRONTIER_WINDOW} positions' logits (the frontier window)`, () => target.set(many), 5);
