// What the key/value cache costs to move at long contexts: a denoising forward of one block
// (64 positions) after P cached positions, with the present key/values fetched (what a step
// that commits a block does) against without (every other step), alternated in one run on
// the same inputs. The difference is the cost of copying `present` = past + current out of
// ONNX Runtime; a contract whose cache outputs held only the new positions would save at most
// that, on committing steps only. Bytes scale with layers × kv heads × head dim, so the
// projection to larger models multiplies the measured copy rate by their bytes per token.
// The fastest of 15 runs of each is compared (the least disturbed by other load).
//
//   npx tsx bench/cache-traffic.ts [model-dir]   (default: models/tessera-bd-small)
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ForwardFetch, ForwardInputs, ForwardRunner } from "../services/inference/decoder/forward.js";
import { createOrtRunner } from "../services/inference/decoder/forward.js";
import { kvShapeOf } from "../services/inference/engine/runtime.js";
import { loadModelDir } from "../services/inference/engine/model-dir.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = process.argv[2] ?? path.join(ROOT, "models", "tessera-bd-small");
const REPEATS = 15;
const S = 64;

function inputsAt(P: number, shape: { layers: number; heads: number; headDim: number }, vocab: number): ForwardInputs {
  const kv = () => Float32Array.from({ length: shape.heads * P * shape.headDim }, () => Math.random() - 0.5);
  return {
    batch: 1,
    seq: S,
    past: P,
    inputIds: BigInt64Array.from({ length: S }, (_, i) => BigInt((i * 7919) % vocab)),
    positionIds: BigInt64Array.from({ length: S }, (_, i) => BigInt(P + i)),
    attentionMask: new Float32Array(S * (P + S)),
    pastKeyValues: Array.from({ length: shape.layers }, () => ({ key: kv(), value: kv() })),
  };
}

async function timed(runner: ForwardRunner, inputs: ForwardInputs, fetch: ForwardFetch): Promise<number> {
  const started = performance.now();
  await runner.run(inputs, fetch);
  return performance.now() - started;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const model = await loadModelDir(dir, { worker: false });
  const shape = kvShapeOf(model);
  const runner = createOrtRunner(model.session, shape);
  const bytesPerToken = shape.layers * 2 * shape.heads * shape.headDim * 4;
  const max = model.config.maxPositions;
  const contexts = [0, 448, 960, 1472, max - S].filter((p, i, all) => p >= 0 && all.indexOf(p) === i);
  console.log(
    `model ${path.basename(dir)}: ${shape.layers} layers × ${shape.heads} kv heads × ${shape.headDim}, ${bytesPerToken / 1024} KiB of cache per token\n`,
  );
  console.log("| past P | step without present | step with present | present copied | extra per commit | copy rate |");
  console.log("| ---: | ---: | ---: | ---: | ---: | ---: |");
  const rates: number[] = [];
  for (const P of contexts) {
    const inputs = inputsAt(P, shape, model.config.vocabSize);
    const without: number[] = [];
    const withPresent: number[] = [];
    await timed(runner, inputs, { output: "readout", present: true }); // warm-up at this shape
    for (let r = 0; r < REPEATS; r++) {
      without.push(await timed(runner, inputs, { output: "readout", present: false }));
      withPresent.push(await timed(runner, inputs, { output: "readout", present: true }));
    }
    const a = Math.min(...without);
    const b = Math.min(...withPresent);
    const bytes = (P + S) * bytesPerToken;
    const extra = Math.max(0, b - a);
    if (P > 0 && extra > 0) rates.push(bytes / (extra / 1000));
    console.log(
      `| ${P} | ${a.toFixed(1)} ms | ${b.toFixed(1)} ms | ${(bytes / 2 ** 20).toFixed(1)} MiB | ${extra.toFixed(1)} ms (${((100 * extra) / a).toFixed(1)}%) | ${
        extra > 0 ? `${(bytes / 2 ** 30 / (extra / 1000)).toFixed(1)} GiB/s` : "—"
      } |`,
    );
  }
  const rate = median(rates);
  const sdar = 28 * 2 * 8 * 128 * 4;
  console.log(
    `\nprojection (copy rate ${(rate / 2 ** 30).toFixed(1)} GiB/s): SDAR-1.7B / Qwen3-1.7B shapes (28 layers × 8 kv heads × 128, ${(sdar / 1024).toFixed(0)} KiB per token) at 2,048 positions: ${((2048 * sdar) / 2 ** 20).toFixed(0)} MiB, ${((1000 * 2048 * sdar) / rate).toFixed(0)} ms per committing step`,
  );
  await model.close();
}

await main();
