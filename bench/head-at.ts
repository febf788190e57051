// The output head at the answer slots only (services/inference/onnx/onnx-head-at.ts), in one run: a
// decision's readout forward (16 rows of 85 tokens after a 960-position past, in forwards of
// 4 rows; one answer slot per row) with the head at every position against the head at the
// answer slots, alternated, on one session and one ONNX Runtime thread; CPU time, so the
// other processes of a shared machine weigh less.
//
//   npx tsx bench/head-at.ts [--iterations N] [--model-dir DIR]
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createOrtRunner, type ForwardInputs } from "../services/inference/decoder/forward.js";
import { kvShapeOf } from "../services/inference/engine/runtime.js";
import { loadModelDir } from "../services/inference/engine/model-dir.js";
import { readoutInputs } from "../services/inference/score/score-batch.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const PAST = 960;
const ROWS = 4;
const SEQ = 85;

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "10" },
    "model-dir": { type: "string", default: path.join(ROOT, "models/tessera-bd-small") },
  },
});
const iterations = Number(values.iterations);
if (!existsSync(values["model-dir"]!)) {
  console.log(`head-at: no model at ${values["model-dir"]}, skipped`);
  process.exit(0);
}
const model = await loadModelDir(values["model-dir"]!, { intraOpThreads: 1, worker: false });
try {
  const shape = kvShapeOf(model);
  const runner = createOrtRunner(model.session, shape);
  const size = shape.heads * PAST * shape.headDim;
  const past = {
    layers: Array.from({ length: shape.layers }, (_, l) => ({
      key: Float32Array.from({ length: size }, (_, i) => Math.sin(i + l) / 4),
      value: Float32Array.from({ length: size }, (_, i) => Math.cos(i + l) / 4),
    })),
    length: PAST,
  };
  const rows = Array.from({ length: ROWS }, (_, b) => ({ tokens: Array.from({ length: SEQ - b }, (_, i) => 4 + ((i * 31 + b) % 4000)) }));
  const inputs = readoutInputs(rows, past, shape, model.config.blockSize, model.config.padTokenId);
  const slots: ForwardInputs = {
    ...inputs,
    logitsAt: { indices: BigInt64Array.from(rows, (row, b) => BigInt(b * inputs.seq + row.tokens.length - 1)), perRow: 1 },
  };
  const cpuMs = async (forward: ForwardInputs) => {
    const started = process.cpuUsage();
    await runner.run(forward, { present: false, output: "logits" });
    const used = process.cpuUsage(started);
    return (used.user + used.system) / 1000;
  };
  await cpuMs(inputs);
  await cpuMs(slots);
  const whole: number[] = [];
  const narrow: number[] = [];
  for (let i = 0; i < iterations; i++) {
    whole.push(await cpuMs(inputs));
    narrow.push(await cpuMs(slots));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`readout forward, ${ROWS} rows of up to ${SEQ} tokens after ${PAST}, one thread, CPU ms (median of ${iterations}):`);
  console.log(`  head at every position: ${median(whole).toFixed(1)} (best ${Math.min(...whole).toFixed(1)})`);
  console.log(`  head at the answer slots: ${median(narrow).toFixed(1)} (best ${Math.min(...narrow).toFixed(1)})`);
  console.log(`  ratio: ${(median(narrow) / median(whole)).toFixed(2)}`);
} finally {
  await model.close();
}
