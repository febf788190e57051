// The canvas sampler's per-step work, JS (sampler.ts processRow, logprobs.ts logprobsAt: the
// reference) against the weightless ONNX graphs the decoder serves with (graph-sampler.ts), on
// the CPU, in one run, at the tiny test model's shape (canvas 16 x vocabulary 384) and at the
// 26B-A4B's (canvas 256 x vocabulary 262,144), on the same random logits (soft-capped range) and
// uniforms: ms per row per step for entropy + argmax + sample, ms per canvas for the logprob
// readout (top 20), and whether the graph's samples and argmax equal the reference's.
//
//   npx tsx bench/canvas-sampler.ts [rounds]
import { GraphSampler } from "../services/inference/decoder/canvas/graph-sampler.js";
import { processRow, seededRandom } from "../services/inference/decoder/canvas/sampler.js";
import { logprobsAt } from "../services/inference/decoder/logprobs.js";

const rounds = Number(process.argv[2] ?? 5);
const mib = (b: number) => (b / 2 ** 20).toFixed(0);
const cpu = (threads: number) => ({ executionProviders: ["cpu"], intraOpNumThreads: threads });

async function time(n: number, f: () => unknown): Promise<number> {
  await f(); // warm-up
  const t = performance.now();
  for (let i = 0; i < n; i++) await f();
  return (performance.now() - t) / n;
}

for (const [name, C, V] of [
  ["tiny model", 16, 384],
  ["26B-A4B", 256, 262_144],
] as const) {
  const random = seededRandom(7);
  const logits = Float32Array.from({ length: C * V }, () => (random() * 2 - 1) * 30);
  const uniforms = Float64Array.from({ length: C }, random);
  const temperature = Math.fround(1.2);
  const big = C * V > 1e6;
  const graphs = { "graph, 1 thread": await GraphSampler.create(V, cpu(1)), "graph, 2 threads": await GraphSampler.create(V, cpu(2)) };
  const jsRounds = big ? 2 : rounds * 20;
  const graphRounds = big ? rounds : rounds * 20;
  const js = await time(jsRounds, () => processRow(logits, C, V, temperature, uniforms));
  const want = processRow(logits, C, V, temperature, uniforms);
  const none = new Uint8Array(V);
  const tokens = Array.from(want.argmax);
  const jsLogprobs = await time(big ? 1 : jsRounds, () => tokens.map((t, i) => logprobsAt(logits, i * V, V, none, t, 20)));
  console.log(
    `${name} (${C} x ${V}): JS sampler ${js.toFixed(3)} ms per row per step, JS logprobs (top 20) ${jsLogprobs.toFixed(3)} ms per canvas`,
  );
  for (const [label, graph] of Object.entries(graphs)) {
    const ms = await time(graphRounds, () => graph.processRow(logits, C, temperature, uniforms));
    const got = await graph.processRow(logits, C, temperature, uniforms);
    const lp = await time(graphRounds, () => graph.logprobs(logits, tokens, 20));
    const samples = got.sample.filter((t, i) => t === want.sample[i]).length;
    const argmax = got.argmax.every((t, i) => t === want.argmax[i]);
    const dh = Math.max(...Array.from(got.entropy, (h, i) => Math.abs(h - want.entropy[i]!)));
    console.log(
      `  ${label}: ${ms.toFixed(3)} ms per row per step (${(js / ms).toFixed(1)}x JS), logprobs ${lp.toFixed(3)} ms per canvas ` +
        `(${(jsLogprobs / lp).toFixed(1)}x JS); samples equal to JS ${samples}/${C}, argmax equal ${argmax}, max |entropy diff| ${dh.toExponential(1)}`,
    );
    await graph.release();
  }
  console.log(`  peak RSS so far ${mib(process.resourceUsage().maxRSS * 1024)} MiB`);
}
