// Prefill chunk size: the time a prompt's prefill takes on the CPU when its tokens go into the
// key/value cache in forwards of at most C tokens, for several C, alternated round by round in
// one process (the ratios to the largest chunk are what to read; the machine's load moves the
// milliseconds). One forward over the whole prompt computes every query against every key and
// masks the later blocks' half away; chunks attend only to what is before them, but each pays
// a forward's fixed cost and copies the cache so far. Also the decision state's prefill.
//
//   npx tsx bench/prefill.ts [--model-dir DIR] [--rounds N] [--threads N] [--chunks 2048,512,256,128] [--lengths 512,1024,1920]
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildPolicy } from "../services/inference/decoder/policies/registry.js";
import { StopMatcher } from "../services/inference/decoder/reply-text.js";
import { loadModelDir } from "../services/inference/engine/model-dir.js";
import { createModelRuntime } from "../services/inference/engine/runtime.js";
import { recordingRunner } from "../test/helpers/recording-runner.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    "model-dir": { type: "string", default: path.join(ROOT, "models", "tessera-bd-small") },
    rounds: { type: "string", default: "5" },
    threads: { type: "string", default: "1" },
    chunks: { type: "string", default: "2048,512,256,128" },
    lengths: { type: "string", default: "512,1024,1920" },
  },
});
const chunks = values.chunks.split(",").map(Number);
const lengths = values.lengths.split(",").map(Number);
const rounds = Number(values.rounds);

const model = await loadModelDir(values["model-dir"], { intraOpThreads: Number(values.threads) });
const SENTENCE = "The harbor was quiet in the early morning, and the boats rested on the water. ";
const filler = model.tokenizer.encode(SENTENCE.repeat(Math.ceil(Math.max(...lengths) / 10)));

/** Prefill ms (the forwards that only fill the cache) of one prompt of `length` tokens, in chunks of `chunk`. */
async function prefillMs(length: number, chunk: number): Promise<{ ms: number; forwards: number }> {
  let recorder: ReturnType<typeof recordingRunner> | undefined;
  const engine = createModelRuntime({
    name: "bench",
    servingIds: ["bench"],
    model,
    slots: 1,
    queue: 1,
    prefillChunk: chunk,
    wrapRunner: (inner) => {
      recorder = recordingRunner(inner);
      return recorder;
    },
  });
  try {
    const stream = await engine.scheduler.generate({
      prompt: filler.slice(0, length),
      maxTokens: 1,
      policy: buildPolicy("sequential"),
      stops: new StopMatcher([]),
      decode: model.tokenizer.decode,
    });
    for await (const _ of stream) {
      // drain
    }
    const prefills = recorder!.forwards.filter((f) => f.fetch.present && f.fetch.output === "none");
    return { ms: prefills.reduce((s, f) => s + f.ms, 0), forwards: prefills.length };
  } finally {
    await engine.scheduler.close(); // not engine.close(): that closes the model the runs share
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = new Map<string, { ms: number[]; forwards: number }>();
for (let r = 0; r < rounds + 1; r++) {
  for (const length of lengths) {
    for (const chunk of chunks) {
      const { ms, forwards } = await prefillMs(length, chunk);
      if (r === 0) continue; // warm-up round
      const key = `${length}|${chunk}`;
      const entry = results.get(key) ?? { ms: [], forwards };
      entry.ms.push(ms);
      results.set(key, entry);
    }
  }
}

console.log(`prefill — ${path.basename(values["model-dir"])}, ${values.threads} thread(s), median of ${rounds} alternated rounds`);
console.log("| prompt tokens | chunk | forwards | prefill ms | vs the largest chunk |");
console.log("| ---: | ---: | ---: | ---: | ---: |");
for (const length of lengths) {
  const base = median(results.get(`${length}|${chunks[0]}`)!.ms);
  for (const chunk of chunks) {
    const { ms, forwards } = results.get(`${length}|${chunk}`)!;
    const m = median(ms);
    console.log(`| ${length} | ${chunk} | ${forwards} | ${m.toFixed(0)} | ${(m / base).toFixed(2)} |`);
  }
}
await model.close();
