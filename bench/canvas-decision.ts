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
//  3. The head narrowed to canvas position 0 (the denoiser's logits_positions) against the
//     whole head: ms per question's readout and the logits each forward returns.
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

// 3. The head narrowed to canvas position 0 against the whole head (FirstTokenReadout's
//    wholeHead): one readout per question (DECISION_DRAWS rows, one forward), the two taking
//    turns; ms per readout and the logits one forward returns.
{
  const reads = await Promise.all(
    rendered.map(async (r) => ({
      cache: await engine.decoder.encode(emptyCache(config.layers), tokenizer.encode(r.prefix + r.suffix)),
      tokens: r.labels.map((l) => tokenizer.encode(l)[0]!),
    })),
  );
  let logitsFloats = 0;
  (model.denoiser as { run: typeof run }).run = (async (...args: Parameters<typeof run>) => {
    const out = await run(...args);
    logitsFloats = out.logits!.data.length;
    return out;
  }) as typeof run;
  const readOnce = async (wholeHead: boolean) => {
    const t = performance.now();
    for (const r of reads) {
      const readout = new FirstTokenReadout(model, { maxForwardTokens: 1024, wholeHead });
      await readout.add({ ...r, done: () => {} });
      await readout.flush();
    }
    return { ms: (performance.now() - t) / reads.length, floats: logitsFloats };
  };
  const ms = { whole: [] as number[], narrowed: [] as number[] };
  let floats = { whole: 0, narrowed: 0 };
  await readOnce(true);
  await readOnce(false);
  for (let k = 0; k < 40; k++) {
    const w = await readOnce(true);
    const n = await readOnce(false);
    ms.whole.push(w.ms);
    ms.narrowed.push(n.ms);
    floats = { whole: w.floats, narrowed: n.floats };
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const [mw, mn] = [median(ms.whole), median(ms.narrowed)];
  console.log(
    `readout per question (${DECISION_DRAWS} rows, one forward): whole head ${mw.toFixed(2)} ms, ${((floats.whole * 4) / 1024).toFixed(1)} KiB ` +
      `of logits; narrowed to position 0 ${mn.toFixed(2)} ms, ${((floats.narrowed * 4) / 1024).toFixed(1)} KiB; ${(mw / mn).toFixed(2)}x faster, ` +
      `${(floats.whole / floats.narrowed).toFixed(0)}x fewer logits (canvas ${config.canvasLength}, vocab ${config.vocabSize})`,
  );
}
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
await engine.close();
