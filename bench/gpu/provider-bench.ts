// One model directory on one execution provider, through the engine (bench/gpu/README.md):
//   1. ms per denoising forward of one 64-token block after P = 0 / 1,024 / 4,096 cached
//      positions (batch 1; the cache made by real prefill forwards, so on WebGPU it is on the
//      device), median of REPEATS;
//   2. tokens/s of whole generations at batch 1 and 8 (8 concurrent requests, 128 tokens each,
//      BENCH_MAX_TOKENS; threshold(0.9)), with forwards per token, through loadModelPool
//      like the server.
// Prints one JSON line. Run where the provider has a device:
//   npx tsx bench/gpu/provider-bench.ts <model-dir> <cpu|webgpu> [contexts, e.g. 0,1024,4096]
import { StopMatcher } from "../../services/inference/decoder/reply-text.js";
import { BatchBuilder } from "../../services/inference/decoder/batch.js";
import { createOrtRunner } from "../../services/inference/decoder/forward.js";
import { createKVCache } from "../../services/inference/decoder/kv-cache.js";
import { decodeModelOf, kvShapeOf } from "../../services/inference/engine/runtime.js";
import { loadModelPool } from "../../services/inference/engine/model-pool.js";
import type { ExecutionProvider } from "../../services/inference/onnx/onnx-session.js";

const [dir, providerArg, contextsArg] = process.argv.slice(2);
if (dir === undefined || (providerArg !== "cpu" && providerArg !== "webgpu")) {
  console.error("usage: provider-bench.ts <model-dir> <cpu|webgpu> [contexts]");
  process.exit(2);
}
const provider = providerArg as ExecutionProvider;
const contexts = (contextsArg ?? "0,1024,4096").split(",").map(Number);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 7);
const MAX_TOKENS = Number(process.env.BENCH_MAX_TOKENS ?? 128);
const S = 64;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const pool = await loadModelPool({
  models: [{ servingId: "m", dir }],
  slots: 8,
  queue: 64,
  executionProviders: [provider],
  ortWorker: false,
  unmaskPolicy: "threshold(0.9)",
});
const engine = pool.runtimes[0]!;
const model = engine.model;
const decode = decodeModelOf(model);
const shape = kvShapeOf(model);
const runner = createOrtRunner(model.session, shape, {
  provider: model.executionProviders[0] ?? "cpu",
  ...(model.deviceKV !== undefined ? { deviceKV: model.deviceKV } : {}),
});
const token = (i: number) => 10 + ((i * 7919) % (decode.vocabSize - 20));

const forwardMs: Record<string, number> = {};
for (const P of contexts) {
  if (P + S > decode.maxPositions) continue;
  const kv = createKVCache(decode, Math.max(P, 1));
  const builder = new BatchBuilder(shape, decode.blockSize, decode.padTokenId);
  for (let done = 0; done < P; ) {
    const n = Math.min(2048, P - done);
    const tokens = Array.from({ length: n }, (_, i) => token(done + i));
    const inputs = builder.build([{ kv, tokens }]);
    const out = await runner.run(inputs, { present: true, output: "none" });
    kv.append(out.present!, 0, inputs.past + inputs.seq, inputs.past, n);
    out.release?.();
    done += n;
  }
  const block = Array.from({ length: S }, (_, i) => (i % 3 === 0 ? decode.maskTokenId : token(P + i)));
  const times: number[] = [];
  for (let r = 0; r < REPEATS + 1; r++) {
    const inputs = builder.build([{ kv, tokens: block }]);
    const started = performance.now();
    await runner.run(inputs, { present: false, output: "readout" });
    if (r > 0) times.push(performance.now() - started); // the first is the warm-up at this shape
  }
  forwardMs[String(P)] = median(times);
  kv.dispose();
  builder.reset();
}

async function generate(batch: number): Promise<{ tokensPerSecond: number; forwardsPerToken: number }> {
  const prompt = Array.from({ length: 100 }, (_, i) => token(i));
  const started = performance.now();
  const runs = await Promise.all(
    Array.from({ length: batch }, async () => {
      const stream = await engine.scheduler.generate({
        prompt,
        maxTokens: MAX_TOKENS,
        policy: engine.policy,
        stops: new StopMatcher([]),
        decode: () => "",
      });
      let tokens = 0;
      let forwards = 0;
      for await (const e of stream) {
        if (e.type === "finished") {
          tokens = e.finished.tokens.length;
          forwards = e.forwardPasses;
        }
      }
      return { tokens, forwards };
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const tokens = runs.reduce((n, r) => n + r.tokens, 0);
  return { tokensPerSecond: tokens / seconds, forwardsPerToken: runs.reduce((n, r) => n + r.forwards, 0) / tokens };
}

await generate(1); // warm-up: shapes of a whole generation
const generation = { batch1: await generate(1), batch8: await generate(8) };
const heldAfter = model.deviceKV?.heldBytes ?? 0;
await pool.close();
console.log(JSON.stringify({ dir, provider, providers: model.executionProviders, forwardMs, generation, deviceBytesHeldAfter: heldAfter }));
