// Serving on the tiny model: concurrent sequences share one forward per step, a full worker
// refuses at once with the Overloaded detail and recovers, an abort frees the slot within one
// step, and a model failure ends only the sequence it belongs to.
import { Code, ConnectError } from "@connectrpc/connect";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OverloadedSchema } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { ForwardInputs } from "../decoder/forward.js";
import { StopMatcher } from "../decoder/reply-text.js";
import { createModelRuntime, type ModelRuntime } from "./runtime.js";
import { engineMetrics } from "../core/metrics.js";
import { loadModelDir, type ModelDir } from "./model-dir.js";
import type { GenerationEvent } from "./scheduler.js";
import { TINY_MODEL_DIR, inputHasToken, recordingRunner, type RecordedForward } from "../../../test/helpers/inference-engine.js";
import { toConnectError } from "../connect-errors.js";

let model: ModelDir;
const engines: ModelRuntime[] = [];

beforeAll(async () => {
  model = await loadModelDir(TINY_MODEL_DIR, { intraOpThreads: 1 });
});

afterAll(async () => {
  for (const e of engines) await e.scheduler.close();
  await model?.close();
});

interface Setup {
  slots?: number;
  queue?: number;
  fail?: (inputs: ForwardInputs) => boolean;
  registry?: Registry;
}

function engineWith({ slots = 4, queue = 4, fail, registry }: Setup = {}) {
  let forwards: RecordedForward[] = [];
  const engine = createModelRuntime({
    name: "tiny",
    servingIds: ["tiny"],
    model,
    slots,
    queue,
    ...(registry !== undefined ? { metrics: engineMetrics(registry) } : {}),
    wrapRunner: (inner) => {
      const r = recordingRunner(inner, fail);
      forwards = r.forwards;
      return r;
    },
  });
  engines.push(engine);
  return { engine, forwards: () => forwards };
}

const chat = (text: string) => model.tokenizer.encode(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`);
/** Runs to max_tokens (no end of turn within 280 tokens): holds its slot for a while. */
const LONG = "2+2=?";

function start(engine: ModelRuntime, prompt: number[], maxTokens: number, signal?: AbortSignal) {
  return engine.scheduler.generate(
    { prompt, maxTokens, policy: engine.policy, stops: new StopMatcher([]), decode: model.tokenizer.decode },
    signal,
  );
}

async function drain(stream: AsyncIterable<GenerationEvent>) {
  const events: GenerationEvent[] = [];
  for await (const e of stream) events.push(e);
  const last = events.at(-1);
  if (last?.type !== "finished") throw new Error("stream ended without finished");
  return last;
}

async function rejection(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(toConnectError(err));
  }
  throw new Error("expected a rejection");
}

describe("batching", () => {
  it("serves concurrent sequences with one forward per step and the same tokens as alone", async () => {
    const prompts = ["hi", "Reply in JSON", "What is the capital of France?", LONG].map(chat);
    const alone: Awaited<ReturnType<typeof drain>>[] = [];
    for (const p of prompts) {
      const { engine } = engineWith();
      alone.push(await drain(await start(engine, p, 100)));
    }

    const { engine, forwards } = engineWith();
    const together = await Promise.all(prompts.map(async (p) => drain(await start(engine, p, 100))));
    together.forEach((t, i) => {
      expect(t.finished.tokens).toEqual(alone[i]!.finished.tokens);
    });

    const runs = forwards();
    expect(Math.max(...runs.map((f) => f.batch))).toBe(4);
    // Every sequence took part in as many forwards as alone, but the forwards were shared.
    const perSequence = together.reduce((sum, t) => sum + t.forwardPasses, 0);
    expect(runs.reduce((sum, f) => sum + f.batch, 0)).toBe(perSequence);
    expect(runs.length).toBeLessThan(perSequence);
    expect(runs.length).toBe(Math.max(...together.map((t) => t.forwardPasses)));
  });

  it("a sequence arriving mid-way joins the running batch", async () => {
    const { engine, forwards } = engineWith();
    const first = drain(await start(engine, chat(LONG), 120));
    await new Promise((r) => setTimeout(r, 30));
    const second = drain(await start(engine, chat("hi"), 20));
    await Promise.all([first, second]);
    expect(forwards().some((f) => f.batch === 2)).toBe(true);
  });
});

describe("overload", () => {
  it("refuses at once with the Overloaded detail when slots and queue are full, then recovers", async () => {
    const { engine } = engineWith({ slots: 1, queue: 1 });
    const running = start(engine, chat(LONG), 150);
    const queued = start(engine, chat("hi"), 10);
    expect(engine.scheduler.slots.free).toBe(0);
    expect(engine.scheduler.slots.queued).toBe(1);

    const refused = await rejection(start(engine, chat("What is the capital of France?"), 10));
    expect(refused.code).toBe(Code.ResourceExhausted);
    const [detail] = refused.findDetails(OverloadedSchema);
    expect(detail?.retryAfterSeconds).toBeGreaterThanOrEqual(1);

    await drain(await running);
    await drain(await queued);
    expect(engine.scheduler.slots.free).toBe(1);
    const later = await drain(await start(engine, chat("What is the capital of France?"), 10));
    expect(later.finished.completionTokens).toBeGreaterThan(0);
  });

  it("with no queue refuses the second request while the first runs", async () => {
    const { engine } = engineWith({ slots: 1, queue: 0 });
    const running = start(engine, chat(LONG), 40);
    const refused = await rejection(start(engine, chat("hi"), 10));
    expect(refused.findDetails(OverloadedSchema)).toHaveLength(1);
    await drain(await running);
  });
});

describe("cancellation", () => {
  it("an abort ends the sequence within one step and frees its slot", async () => {
    const { engine, forwards } = engineWith({ slots: 1, queue: 0 });
    const abort = new AbortController();
    const stream = await start(engine, chat(LONG), 250, abort.signal);
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next(); // the first block (about 40 steps in)
    expect(first.value?.type).toBe("block");

    const forwardsAtAbort = forwards().length;
    abort.abort();
    const err = await rejection(iterator.next());
    expect(err.code).toBe(Code.Canceled);
    expect(forwards().length - forwardsAtAbort).toBeLessThanOrEqual(1);
    expect(engine.scheduler.slots.free).toBe(1);
    expect(engine.scheduler.activeCount).toBe(0);

    // The slot is usable at once.
    await drain(await start(engine, chat("hi"), 10));
  });

  it("leaving the stream early (a cancelled RPC) cancels the sequence", async () => {
    const { engine, forwards } = engineWith({ slots: 1, queue: 0 });
    const stream = await start(engine, chat(LONG), 250);
    for await (const e of stream) {
      expect(e.type).toBe("block");
      break;
    }
    const after = forwards().length;
    await new Promise((r) => setTimeout(r, 50));
    expect(forwards().length - after).toBeLessThanOrEqual(1);
    expect(engine.scheduler.slots.free).toBe(1);
  });

  it("an abort while queued leaves the queue", async () => {
    const { engine } = engineWith({ slots: 1, queue: 1 });
    const running = start(engine, chat(LONG), 60);
    const abort = new AbortController();
    const queued = start(engine, chat("hi"), 10, abort.signal);
    expect(engine.scheduler.slots.queued).toBe(1);
    abort.abort();
    expect((await rejection(queued)).code).toBe(Code.Canceled);
    expect(engine.scheduler.slots.queued).toBe(0);
    await drain(await running);
  });
});

describe("model failure", () => {
  const poison = () => model.tokenizer.tokenId("<|endoftext|>")!;

  it("fails only the sequence whose row fails; the others finish with their own tokens", async () => {
    const healthy = chat("What does serendipity mean?");
    const { engine: alone } = engineWith();
    const expected = await drain(await start(alone, healthy, 100));
    expect(expected.finished.tokens).not.toContain(poison());

    const { engine, forwards } = engineWith({ fail: (inputs) => inputHasToken(inputs, poison()) });
    const good = start(engine, healthy, 100).then(drain);
    const bad = start(engine, chat("hi<|endoftext|>"), 100).then(drain);
    const err = await rejection(bad);
    expect(err.code).toBe(Code.Unavailable);
    expect(err.message).toContain("tiny");
    const result = await good;
    expect(result.finished.tokens).toEqual(expected.finished.tokens);
    // The batched forward failed and was retried row by row.
    expect(forwards().some((f) => f.failed && f.batch === 2)).toBe(true);
    expect(engine.scheduler.slots.free).toBe(4);
  });

  it("a failing prefill ends that sequence only", async () => {
    const long = [...chat(`<|endoftext|>${" The quick brown fox jumps over the lazy dog.".repeat(6)}`), ...chat("hi")];
    expect(long.length).toBeGreaterThan(64);
    const { engine } = engineWith({ fail: (inputs) => inputHasToken(inputs, poison()) });
    const good = start(engine, chat("What is the capital of France?"), 30).then(drain);
    expect((await rejection(start(engine, long, 30).then(drain))).code).toBe(Code.Unavailable);
    expect((await good).finished.completionTokens).toBe(15);
  });
});

describe("metrics", () => {
  it("counts forwards by phase, generated tokens and busy slots", async () => {
    const registry = new Registry();
    const { engine } = engineWith({ registry });
    const long = [...chat(" The quick brown fox jumps over the lazy dog.".repeat(8)), ...chat("hi")];
    const done = await drain(await start(engine, long, 30));
    const value = async (name: string, labels: Record<string, string>) => {
      const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name)!;
      return (metric.values as { labels: Record<string, string>; value: number }[]).find((v) =>
        Object.entries(labels).every(([k, l]) => v.labels[k] === l),
      )?.value;
    };
    expect(await value("tessera_forward_passes_total", { model: "tiny", phase: "prefill" })).toBe(1);
    expect(await value("tessera_forward_passes_total", { model: "tiny", phase: "denoise" })).toBe(done.forwardPasses - 1);
    expect(await value("tessera_generated_tokens_total", { model: "tiny" })).toBe(done.finished.completionTokens);
    expect(await value("tessera_generation_slots_busy", { model: "tiny" })).toBe(0);
    const text = await registry.metrics();
    expect(text).toContain('tessera_inference_request_duration_seconds_count{model="tiny"} 1');
    expect(text).toContain("tessera_time_to_first_block_seconds_bucket");
  });
});
