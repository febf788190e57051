// Run by test/convert/webgpu-new-kv.test.ts under SwiftShader (see swiftshader.ts): a converted
// autoregressive model with `present_new.*` (TESSERA_NEW_KV_MODEL) served on the CPU provider and
// on WebGPU, where each step's new key/values stay on the device and are appended there. Prints
// one JSON line: both providers' greedy replies, the key/value bytes that crossed, and the device
// tensors still held after.
import { Registry } from "prom-client";
import { engineMetrics } from "../../services/inference/core/metrics.js";
import { loadModelDir } from "../../services/inference/engine/model-dir.js";
import { createModelRuntime } from "../../services/inference/engine/runtime.js";
import { greedyTokens } from "./greedy-tokens.js";

const dir = process.env.TESSERA_NEW_KV_MODEL;
if (dir === undefined) throw new Error("TESSERA_NEW_KV_MODEL is not set");

const out: Record<string, unknown> = {};
const registry = new Registry();
const metrics = engineMetrics(registry);
for (const provider of ["cpu", "webgpu"] as const) {
  const model = await loadModelDir(dir, { executionProviders: [provider], worker: false, intraOpThreads: 1 });
  const engine = createModelRuntime({
    name: provider,
    servingIds: [],
    model,
    slots: 2,
    queue: 4,
    metrics,
  });
  const prompts = ["the quick brown fox jumps over", "Options: A, B, C, D."].map((t) => model.tokenizer.encode(t));
  out[provider] = await Promise.all(prompts.map((p) => greedyTokens(engine, p, 16)));
  if (provider === "webgpu") {
    out.outputs = model.session.outputNames.filter((n) => n.startsWith("present_new.")).length;
    out.held = model.deviceKV!.heldTensors;
  }
  await engine.close();
}
const bytes = (await metrics.hostDeviceBytes.get()).values.filter((v) => v.labels.model === "webgpu");
out.kvBytes = Object.fromEntries(bytes.map((v) => [`${v.labels.direction}/${v.labels.kind}`, v.value]));
console.log(JSON.stringify(out));
