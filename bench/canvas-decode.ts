// A canvas model's (contract v3, DiffusionGemma) decoding cost: ms per denoising step at batch 1
// and with 4 rows in flight, split into the denoiser forward and the rest (the sampler graph's
// entropy, argmax and sample over [canvas, vocab], the accept rule), the encoder's ms per canvas, tokens per step, and memory
// (RSS before and after loading, peak). Four prompts are decoded one at a time, then together,
// in one run, with the same seeds; the ratio of the two throughputs is what batching buys.
// Then the JS reference sampler and logprob readout at the 26B-A4B's vocabulary (262,144) on
// random logits, per [position x vocabulary] element (the graphs the decoder serves with
// against them: bench/canvas-sampler.ts; README, "Serving DiffusionGemma").
//
//   npx tsx bench/canvas-decode.ts <model-dir> [max-tokens]   (a `tessera convert` of a diffusion_gemma checkpoint)
import { CanvasDecoder, seededDraws } from "../services/inference/decoder/canvas/canvas-decoder.js";
import { loadCanvasModel } from "../services/inference/decoder/canvas/canvas-model.js";
import { processRow, seededRandom } from "../services/inference/decoder/canvas/sampler.js";
import { logprobsAt } from "../services/inference/decoder/logprobs.js";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: npx tsx bench/canvas-decode.ts <model-dir> [max-tokens]");
  process.exit(2);
}
const maxTokens = Number(process.argv[3] ?? 64);
const mib = (b: number) => (b / 2 ** 20).toFixed(1);
const rssBefore = process.memoryUsage().rss;
const model = await loadCanvasModel(dir, { intraOpThreads: 1 });
const rssLoaded = process.memoryUsage().rss;

const timers = { denoiser: 0, denoiserCalls: 0, encoder: 0, encoderCalls: 0 };
const wrap = (session: typeof model.denoiser, key: "denoiser" | "encoder") => {
  const run = session.run.bind(session);
  (session as { run: typeof run }).run = (async (...args: Parameters<typeof run>) => {
    const t = performance.now();
    try {
      return await run(...args);
    } finally {
      timers[key] += performance.now() - t;
      timers[`${key}Calls`]++;
    }
  }) as typeof run;
};
wrap(model.denoiser, "denoiser");
wrap(model.encoder, "encoder");

const prompts = [
  "Hello! How are you today?",
  "The weather in Paris is sunny.",
  "Answer the question, think step by step.",
  "0123456789 the quick brown fox",
].map((text) => model.tokenizer.encode(model.renderChat({ messages: [{ role: "user", content: text }], add_generation_prompt: true })));

async function run(together: boolean) {
  Object.assign(timers, { denoiser: 0, denoiserCalls: 0, encoder: 0, encoderCalls: 0 });
  const decoder = new CanvasDecoder(model);
  const t = performance.now();
  const results = together
    ? await Promise.all(prompts.map((p, i) => decoder.generate({ promptIds: p, maxTokens, draws: seededDraws(i + 1) })))
    : [];
  if (!together)
    for (const [i, p] of prompts.entries()) results.push(await decoder.generate({ promptIds: p, maxTokens, draws: seededDraws(i + 1) }));
  const wall = performance.now() - t;
  const steps = results.reduce((s, r) => s + r.steps, 0);
  const tokens = results.reduce((s, r) => s + r.tokens.length, 0);
  return { wall, steps, tokens, forwards: decoder.stats.forwards, ...timers };
}

await run(false); // warm-up
const alone = await run(false);
const batched = await run(true);
const c = model.config;
console.log(
  `model ${dir}: ${c.layers.length} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}, canvas ${c.canvasLength}, ${c.sampler.maxDenoisingSteps} steps max`,
);
for (const [name, r] of [
  ["alone (batch 1)", alone],
  ["4 rows together", batched],
] as const) {
  const perForward = r.denoiser / r.denoiserCalls;
  // Wall time per forward includes the sampler and the encoder calls (which may overlap
  // the denoiser when prompts arrive together), so only the ONNX Runtime share is split out.
  console.log(
    `${name}: ${(r.wall / r.forwards).toFixed(2)} ms wall per denoiser forward (${perForward.toFixed(2)} ms of it in the ` +
      `denoiser session), ${(r.steps / r.forwards).toFixed(2)} rows per forward, encoder ${(r.encoder / r.encoderCalls).toFixed(2)} ms per call, ` +
      `${(r.tokens / r.steps).toFixed(2)} tokens per step, ${((r.tokens / r.wall) * 1000).toFixed(0)} tokens/s`,
  );
}
console.log(`throughput together / alone: ${(batched.tokens / batched.wall / (alone.tokens / alone.wall)).toFixed(2)}x`);
console.log(
  `memory: RSS ${mib(rssBefore)} MiB before load, ${mib(rssLoaded)} MiB loaded, peak ${mib(process.resourceUsage().maxRSS * 1024)} MiB`,
);
await model.close();

// The sampler at the 26B's vocabulary: 16 positions of random logits (soft-capped range), timed
// per element, and the logprob readout (top 20) of one position.
const VOCAB_26B = 262_144;
const POSITIONS = 16;
const random = seededRandom(7);
const logits = Float32Array.from({ length: POSITIONS * VOCAB_26B }, () => (random() * 2 - 1) * 30);
const uniforms = Float64Array.from({ length: POSITIONS }, random);
processRow(logits, POSITIONS, VOCAB_26B, 1.2, uniforms); // warm-up
let t = performance.now();
const rounds = 3;
for (let i = 0; i < rounds; i++) processRow(logits, POSITIONS, VOCAB_26B, 1.2, uniforms);
const samplerNs = ((performance.now() - t) * 1e6) / (rounds * POSITIONS * VOCAB_26B);
const noBans = new Uint8Array(VOCAB_26B);
t = performance.now();
for (let i = 0; i < POSITIONS; i++) logprobsAt(logits, i * VOCAB_26B, VOCAB_26B, noBans, 0, 20);
const logprobNs = ((performance.now() - t) * 1e6) / (POSITIONS * VOCAB_26B);
const step26b = (samplerNs * 256 * VOCAB_26B) / 1e6;
console.log(
  `sampler at vocabulary ${VOCAB_26B}: ${samplerNs.toFixed(2)} ns per element (${step26b.toFixed(0)} ms per row per 256-position step); ` +
    `logprobs (top 20): ${logprobNs.toFixed(2)} ns per element (${((logprobNs * 256 * VOCAB_26B) / 1e6).toFixed(0)} ms per 256-token canvas)`,
);
