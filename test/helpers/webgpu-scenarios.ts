// The WebGPU scenarios of services/inference/onnx/webgpu.test.ts, run in a child process started
// with the Vulkan loader's environment (the dynamic loader reads LD_LIBRARY_PATH only when a
// process starts). The tiny model is served twice, on the CPU provider and on WebGPU, and the
// same requests go to both; the results come back as one JSON line on stdout.
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { Registry } from "prom-client";
import { InferenceService, ResponseFormatType, Role } from "../../gen/tessera/inference/v1/inference_pb.js";
import { silentLogger } from "../../lib/logger.js";
import type { ForwardRunner } from "../../services/inference/decoder/forward.js";
import { loadModelPool, type ModelPool } from "../../services/inference/engine/model-pool.js";
import { LOGITS_AT } from "../../services/inference/onnx/onnx-head.js";
import type { ExecutionProvider } from "../../services/inference/onnx/onnx-session.js";
import { scoreSuffixes } from "../../services/inference/score/score.js";
import { inferenceRoutes } from "../../services/inference/server.js";
import { collectGeneration } from "./inference-service.js";
import { TINY_MODEL_DIR } from "./inference-engine.js";

const user = (text: string) => ({ role: Role.USER, content: [{ part: { case: "text" as const, value: text } }] });
const LONG =
  "The invoice is 90 days overdue and the customer has not answered three e-mails about it. The quick brown fox jumps over the lazy dog. ";
const SCHEMA = {
  type: "object",
  properties: { answer: { type: "string", enum: ["yes", "no"] }, score: { type: "integer" } },
  required: ["answer", "score"],
  additionalProperties: false,
};

/** Four requests of different lengths: plain, long (a prefilled block and more), thinking, a JSON schema reply. */
const GENERATIONS = [
  { model: "tiny", messages: [user("hi")], options: { maxTokens: 40 } },
  { model: "tiny", messages: [user(LONG.repeat(3))], options: { maxTokens: 70 } },
  { model: "tiny", messages: [user(`Think first. ${LONG}`)], options: { maxTokens: 64, enableThinking: true } },
  {
    model: "tiny",
    messages: [user("Reply in JSON: is it urgent?")],
    options: {
      maxTokens: 48,
      responseFormat: { type: ResponseFormatType.JSON_SCHEMA, jsonSchema: { name: "urgency", schema: SCHEMA, strict: true } },
    },
  },
];

/** A prompt of a whole block and more: its first block is prefilled into a cache on the device. */
const CACHED = { model: "tiny", messages: [user(LONG)], options: { maxTokens: 70 } };

const PREFIX = `<|im_start|>system\nAnswer the question about the state below.<|im_end|>\n<|im_start|>user\nState:\n${LONG}\n`;
const SUFFIXES = [
  { text: "\nQuestion: Is this urgent?\nAnswer yes or no.<|im_end|>\n<|im_start|>assistant\n", labels: ["<|yes|>", "<|no|>"] },
  {
    text: "\nQuestion: Which option fits the state best?\nOptions:\n<|opt_0|> pay\n<|opt_1|> wait\n<|opt_2|> sue\nAnswer with the label of one option.<|im_end|>\n<|im_start|>assistant\n",
    labels: ["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"],
  },
  { text: "\nQuestion: Rate it.\n<|im_end|>\n<|im_start|>assistant\n", labels: ["<|opt_0|>", "<|opt_1|>"] },
  { text: "\nQuestion: Pay now?<|im_end|>\n<|im_start|>assistant\n", labels: ["yes", "no way"] },
];

/**
 * Questions whose rows are longer than a decision's forward may be (CHUNKED_ROW_TOKENS, the
 * TESSERA_MAX_DECISION_ROW_TOKENS of the engine they run on): each question's head goes into a
 * cache of its own, copied from the state's, in chunks, before its answer rows are read.
 */
const CHUNKED_ROW_TOKENS = 128;
const MANY_OPTIONS = Array.from({ length: 40 }, (_, i) => `<|opt_${i}|> option ${i}${i % 3 === 0 ? ": a short description" : ""}\n`).join(
  "",
);
const CHUNKED_SUFFIXES = [
  {
    text: `\nQuestion: Which option fits the state best?\nOptions:\n${MANY_OPTIONS}Answer with the label of one option.<|im_end|>\n<|im_start|>assistant\n`,
    labels: ["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"],
  },
  {
    text: `\nQuestion: Pay now? ${"one of many reasons to wait, ".repeat(30)}<|im_end|>\n<|im_start|>assistant\n`,
    labels: ["yes", "no way"],
  },
];

interface Served {
  pool: ModelPool;
  client: ReturnType<typeof createClient<typeof InferenceService>>;
  registry: Registry;
  /** Forwards still to fail (a failed batched step is retried row by row: 2 fail a lone sequence). */
  failNext: { count: number };
}

async function serve(provider: ExecutionProvider, slots: number): Promise<Served> {
  const logger = silentLogger();
  const registry = new Registry();
  const failNext = { count: 0 };
  const failing = (inner: ForwardRunner): ForwardRunner => ({
    run: (inputs, fetch) => {
      if (failNext.count > 0) {
        failNext.count--;
        return Promise.reject(new Error("injected model failure"));
      }
      return inner.run(inputs, fetch);
    },
  });
  const pool = await loadModelPool({
    models: [{ servingId: "tiny", dir: TINY_MODEL_DIR }],
    slots,
    queue: 200,
    intraOpThreads: 1,
    executionProviders: [provider],
    ortWorker: false,
    // Whole blocks a step where the model allows (SwiftShader runs a 64-token forward in ~0.5 s).
    unmaskPolicy: "threshold(0)",
    threshold: 0,
    logger,
    metrics: registry,
    wrapRunner: failing,
  });
  const client = createClient(InferenceService, createRouterTransport(inferenceRoutes({ pool, workerId: "w" })));
  return { pool, client, registry, failNext };
}

async function generations(s: Served, requests: typeof GENERATIONS) {
  const results = await Promise.all(requests.map((req) => collectGeneration(s.client, req)));
  return results.map((r) => ({ content: r.content, reasoning: r.reasoning, reason: r.finished.finishReason }));
}

async function decisions(s: Served, suffixes: typeof SUFFIXES, prefix = PREFIX) {
  const res = await s.client.score({ model: "tiny", prefix, suffixes });
  return res.results.map((r) => r.logits);
}

/** The chunked decisions, on an engine whose decision forwards hold at most CHUNKED_ROW_TOKENS. */
async function chunkedDecisions(s: Served) {
  const engine = { ...s.pool.runtimes[0]!, maxScoreRowTokens: CHUNKED_ROW_TOKENS };
  const prefills = async () => (await metric(s, "tessera_forward_passes_total"))["tiny-model/prefill"] ?? 0;
  const before = await prefills();
  const res = await scoreSuffixes(engine, { prefix: PREFIX, suffixes: CHUNKED_SUFFIXES });
  return { logits: res.results.map((r) => r.logits), prefills: (await prefills()) - before };
}

async function metric(s: Served, name: string): Promise<Record<string, number>> {
  const m = (await s.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const out: Record<string, number> = {};
  for (const v of (m?.values ?? []) as { labels: Record<string, string>; value: number }[]) {
    if (v.labels.le !== undefined) continue;
    out[Object.values(v.labels).join("/")] = v.value;
  }
  return out;
}

const timings: Record<string, number> = {};
async function timed<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work();
  } finally {
    timings[name] = Math.round(performance.now() - started);
    process.stderr.write(`webgpu scenarios: ${name} ${timings[name]} ms\n`);
  }
}

const cpu = await serve("cpu", 4);
const gpu = await serve("webgpu", 4);
const ops = gpu.pool.runtimes[0]!.model.deviceKV!;
const out: Record<string, unknown> = {
  providers: gpu.pool.runtimes[0]!.model.executionProviders,
  // The head narrowed to the answer slots (onnx-head-at.ts: a Gather before the head's Gemm) on WebGPU too.
  headAt: gpu.pool.runtimes[0]!.model.session.inputNames.includes(LOGITS_AT),
};
out.baseline = { tensors: ops.heldTensors, bytes: ops.heldBytes };

for (const [name, s] of [
  ["cpu", cpu],
  ["webgpu", gpu],
] as const) {
  out[name] = {
    single: await timed(`${name} single`, () => generations(s, GENERATIONS.slice(1, 2))),
    batch: await timed(`${name} batch`, () => generations(s, GENERATIONS)),
    decisionOne: await timed(`${name} decision 1`, () => decisions(s, SUFFIXES.slice(0, 1))),
    decisionFour: await timed(`${name} decision 4`, () => decisions(s, SUFFIXES)),
    decisionChunked: await timed(`${name} decision chunked`, () => chunkedDecisions(s)),
  };
  if (name === "webgpu") out.afterChunked = { tensors: ops.heldTensors, bytes: ops.heldBytes };
}
out.afterParity = { tensors: ops.heldTensors, bytes: ops.heldBytes };
out.transfer = await metric(gpu, "tessera_host_device_bytes_total");
out.forwards = await metric(gpu, "tessera_forward_passes_total");

// A cancelled request (mid-reply, its cache on the device) and a failed forward free their tensors.
await timed("cancel", async () => {
  const abort = new AbortController();
  const stream = gpu.client.generate(CACHED, { signal: abort.signal });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  await it.next();
  out.cancelHeld = ops.heldTensors; // the prompt's block is on the device by now
  abort.abort();
  out.cancelled = await it.next().then(
    () => "not cancelled",
    (err: unknown) => String(err),
  );
  for (let i = 0; i < 100 && gpu.pool.slotsFree() < 4; i++) await new Promise((r) => setTimeout(r, 20));
  out.afterCancel = { tensors: ops.heldTensors, bytes: ops.heldBytes };
});
await timed("fail", async () => {
  const first = collectGeneration(gpu.client, CACHED);
  // Fail the denoising forward after the prefill: the sequence holds its prompt's cache then.
  while (ops.heldTensors === 0) await new Promise((r) => setImmediate(r));
  gpu.failNext.count = 2;
  out.failed = await first.then(
    () => "not failed",
    (err: unknown) => String(err),
  );
  out.afterFail = { tensors: ops.heldTensors, bytes: ops.heldBytes };
});

// 100 requests leave nothing behind: 90 decisions on a state shorter than a block (one forward
// of a short row: its present and logits made on the device, the logits brought back, all
// freed) and 10 on a state of a whole block (its cache on the device, gathered for two question
// rows). Decisions, one at a time: a reply's forward is a whole 64-token block, and SwiftShader
// runs a batched forward slower per token than single rows (the parity runs above batch).
await timed("hundred", async () => {
  let peak = 0;
  const gauge = ops.onHeld;
  ops.onHeld = (bytes) => {
    peak = Math.max(peak, bytes);
    gauge?.(bytes);
  };
  const shortState = "<|im_start|>user\nState: overdue.\n";
  for (let i = 0; i < 100; i++) {
    if (i % 10 === 9) await decisions(gpu, SUFFIXES.slice(0, 2));
    else await decisions(gpu, SUFFIXES.slice(0, 1), shortState);
  }
  ops.onHeld = gauge;
  out.hundred = { tensors: ops.heldTensors, bytes: ops.heldBytes, peakBytes: peak };
});
out.gauge = await metric(gpu, "tessera_device_kv_bytes");
out.timings = timings;
await Promise.all([cpu.pool.close(), gpu.pool.close()]);
process.stdout.write(`${JSON.stringify(out)}\n`);
