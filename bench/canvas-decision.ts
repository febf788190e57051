// Decisions on a canvas model (contract v3, DiffusionGemma; canvas-score.ts): how much the
// label distribution depends on the noise canvas it is read on, and what a decision costs.
//
//  1. Spread over draws: for each question (choice and score: single-token labels), the label
//     distribution read on each of 32 noise canvases alone, on the 4 the service uses (their
//     mean) and on all 32 (the reference for the marginal the readout estimates). Printed: the
//     largest |p(one canvas) − p(32)| and |p(4) − p(32)| over labels, and whether the argmax agrees.
//  2. Cost: one request of 16 questions against 16 requests of one question (same questions),
//     in one run: ms and denoiser forwards of each; the ratio is what batching and the shared
//     state cache buy.
//
//   npx tsx bench/canvas-decision.ts <model-dir>   (a `tessera convert` of a diffusion_gemma checkpoint, with decision.json)
import { softmax } from "../lib/decision-types/probabilities.js";
import { renderDecisionPrompt } from "../lib/decision-types/render.js";
import { canvasScore } from "../services/inference/canvas/canvas-score.js";
import { loadCanvasEngine } from "../services/inference/canvas/canvas-service.js";
import { seededDraws } from "../services/inference/decoder/canvas/canvas-decoder.js";
import { emptyCache } from "../services/inference/decoder/canvas/canvas-kv.js";
import { DECISION_DRAWS, DECISION_NOISE_SEED, FirstTokenReadout } from "../services/inference/decoder/canvas/canvas-readout.js";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: npx tsx bench/canvas-decision.ts <model-dir>");
  process.exit(2);
}
const engine = await loadCanvasEngine(dir, "bench", ["bench"], { slots: 1, queue: 32, intraOpThreads: 1 });
const { model } = engine;
if (model.decision === undefined) throw new Error(`${dir}: no decision.json`);
const { config, tokenizer } = model;

const state = { order: "A-1092", note: "The weather in Paris is sunny today. The customer asks for the quick brown fox." };
const questions = [
  { type: "choice", instructions: "Which city?", criteria: { Paris: null, London: "the capital", Rome: null } },
  { type: "score", criteria: ["low", "medium", "high", "very high"] },
  { type: "choice", instructions: "What is the weather?", criteria: { sunny: null, rain: null, snow: null, fog: null } },
  { type: "score", instructions: "How urgent?", criteria: ["not", "somewhat", "very"] },
];
const rendered = questions.map((q) => renderDecisionPrompt(model.decision!, state, q));

// 1. Spread over draws.
const ALL = 32;
const canvases = Array.from({ length: ALL }, (_, k) => seededDraws(DECISION_NOISE_SEED + k).noise(config.canvasLength, config.vocabSize));
async function distribution(ids: number[], labels: number[], noise: Int32Array[]): Promise<number[]> {
  const cache = await engine.decoder.encode(emptyCache(config.layers), ids);
  let out: number[] = [];
  const readout = new FirstTokenReadout(model, { maxForwardTokens: 1024, noise });
  await readout.add({ cache, tokens: labels, done: (p) => (out = softmax(p.map(Math.log))) });
  await readout.flush();
  return out;
}
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i]!)));
const argmax = (p: number[]) => p.indexOf(Math.max(...p));
console.log(`spread over noise canvases (canvas ${config.canvasLength}, vocab ${config.vocabSize}; the service reads ${DECISION_DRAWS}):`);
console.log(
  "question | labels | max |p(1 canvas) − p(32)| (worst canvas) | max |p(4) − p(32)| | argmax(1) = argmax(32) | argmax(4) = argmax(32)",
);
for (const [i, r] of rendered.entries()) {
  const ids = tokenizer.encode(r.prefix + r.suffix);
  const labels = r.labels.map((l) => tokenizer.encode(l));
  if (labels.some((l) => l.length !== 1)) continue;
  const tokens = labels.map((l) => l[0]!);
  const reference = await distribution(ids, tokens, canvases);
  const four = await distribution(ids, tokens, canvases.slice(0, DECISION_DRAWS));
  const singles = await Promise.all(canvases.map((c) => distribution(ids, tokens, [c])));
  const worst = Math.max(...singles.map((p) => maxDiff(p, reference)));
  const agree = singles.filter((p) => argmax(p) === argmax(reference)).length;
  console.log(
    `${i} ${questions[i]!.type} | ${tokens.length} | ${worst.toFixed(3)} | ${maxDiff(four, reference).toFixed(3)} | ` +
      `${agree}/${ALL} | ${argmax(four) === argmax(reference) ? "yes" : "no"}`,
  );
}

// 2. Cost: 16 questions in one request against 16 requests of one.
const sixteen = Array.from({ length: 16 }, (_, i) => rendered[i % rendered.length]!);
const prefix = sixteen[0]!.prefix;
const suffixes = sixteen.map((r) => ({ text: r.suffix, labels: r.labels }));
let forwards = 0;
const run = model.denoiser.run.bind(model.denoiser);
(model.denoiser as { run: typeof run }).run = ((...args: Parameters<typeof run>) => {
  forwards++;
  return run(...args);
}) as typeof run;
const limits = { maxWorkTokens: 1_000_000, maxRowTokens: 1024 };
await canvasScore(engine, { prefix, suffixes: suffixes.slice(0, 2) }, limits); // warm-up
const timed = async (f: () => Promise<unknown>) => {
  forwards = 0;
  const t = performance.now();
  await f();
  return { ms: performance.now() - t, forwards };
};
const together = await timed(() => canvasScore(engine, { prefix, suffixes }, limits));
const apart = await timed(async () => {
  for (const s of suffixes) await canvasScore(engine, { prefix, suffixes: [s] }, limits);
});
console.log(
  `16 questions: one request ${together.ms.toFixed(0)} ms (${together.forwards} denoiser forwards), ` +
    `16 requests ${apart.ms.toFixed(0)} ms (${apart.forwards}); one request is ${(apart.ms / together.ms).toFixed(2)}x faster`,
);
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
await engine.close();
