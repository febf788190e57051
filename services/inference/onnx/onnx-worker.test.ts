import path from "node:path";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSession, ortWorkerDefault } from "./onnx-session.js";
import { handOver, isWorkerSession, lastWorkerRun, lend, repeatedRowFeed } from "./onnx-worker-session.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";

const MODEL = path.join(TINY_MODEL_DIR, "model.onnx");
const LAYERS = 2;
const KV_HEADS = 2;
const HEAD_DIM = 16;
const VOCAB = 687;

/** Contract feeds for a `[B, S]` forward over `P` past slots, with deterministic contents. */
function feeds(B: number, S: number, P: number): Record<string, ort.Tensor> {
  let seed = 7;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const f: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: B * S }, () => BigInt(Math.floor(next() * 500))),
      [B, S],
    ),
    position_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: B * S }, (_, i) => BigInt(P + (i % S))),
      [B, S],
    ),
    attention_mask: new ort.Tensor("float32", new Float32Array(B * S * (P + S)), [B, 1, S, P + S]),
  };
  for (let l = 0; l < LAYERS; l++) {
    for (const kind of ["key", "value"]) {
      const data = Float32Array.from({ length: B * KV_HEADS * P * HEAD_DIM }, () => next() - 0.5);
      f[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", data, [B, KV_HEADS, P, HEAD_DIM]);
    }
  }
  return f;
}

describe("ONNX Runtime session on a worker thread", () => {
  let inThread: ort.InferenceSession;
  let onWorker: ort.InferenceSession;

  beforeAll(async () => {
    inThread = (await openSession(MODEL, { intraOpThreads: 1, worker: false })).session;
    onWorker = (await openSession(MODEL, { intraOpThreads: 1, worker: true })).session;
  });
  afterAll(async () => {
    await inThread.release();
    await onWorker.release();
  });

  it("is on by default and off with TESSERA_ORT_WORKER=0", () => {
    expect(ortWorkerDefault({})).toBe(true);
    expect(ortWorkerDefault({ TESSERA_ORT_WORKER: "1" })).toBe(true);
    expect(ortWorkerDefault({ TESSERA_ORT_WORKER: "0" })).toBe(false);
    expect(ortWorkerDefault({ TESSERA_ORT_WORKER: "false" })).toBe(false);
  });

  it("has the model's inputs, outputs and metadata", () => {
    expect(onWorker).not.toBeInstanceOf(ort.InferenceSession);
    expect(onWorker.inputNames).toEqual(inThread.inputNames);
    expect(onWorker.outputNames).toEqual(inThread.outputNames);
    expect(onWorker.outputMetadata).toEqual(inThread.outputMetadata);
  });

  it("computes what the in-thread session computes, and leaves the caller's feeds usable", async () => {
    const input = feeds(2, 8, 4);
    const fetches = ["logits", "present.1.value"];
    const want = await inThread.run(input, fetches);
    const got = await onWorker.run(input, fetches);
    expect(Object.keys(got).sort()).toEqual([...fetches].sort());
    for (const name of fetches) {
      expect(got[name]!.dims).toEqual(want[name]!.dims);
      expect(got[name]!.type).toBe(want[name]!.type);
      expect(got[name]!.data).toEqual(want[name]!.data);
    }
    expect(got.logits!.dims).toEqual([2, 8, VOCAB]);
    // The engine reuses its input arrays (KV cache, mask): they must not be detached.
    const past = input["past_key_values.0.key"]!.data as Float32Array;
    expect(past.length).toBe(2 * KV_HEADS * 4 * HEAD_DIM);
    expect(past.buffer.byteLength).toBeGreaterThan(0);
  });

  it("materialises repeatedRowFeed's rows on the worker: the same bits as rows copied here", async () => {
    const [B, S, P] = [3, 5, 6];
    const base = feeds(B, S, P);
    const repeated: Record<string, ort.Tensor> = { ...base };
    const copied: Record<string, ort.Tensor> = { ...base };
    for (let l = 0; l < LAYERS; l++) {
      for (const kind of ["key", "value"]) {
        const name = `past_key_values.${l}.${kind}`;
        const row = (base[name]!.data as Float32Array).subarray(0, KV_HEADS * P * HEAD_DIM);
        const shared = new Float32Array(new SharedArrayBuffer(row.byteLength));
        shared.set(row);
        const full = new Float32Array(B * row.length);
        for (let b = 0; b < B; b++) full.set(row, b * row.length);
        repeated[name] = new ort.Tensor("float32", repeatedRowFeed(l === 0 ? shared : row, B), [B, KV_HEADS, P, HEAD_DIM]);
        copied[name] = new ort.Tensor("float32", full, [B, KV_HEADS, P, HEAD_DIM]);
      }
    }
    const want = await inThread.run(copied, ["logits", "present.1.key"]);
    const got = await onWorker.run(repeated, ["logits", "present.1.key"]);
    expect(got.logits!.data).toEqual(want.logits!.data);
    expect(got["present.1.key"]!.data).toEqual(want["present.1.key"]!.data);
    expect(isWorkerSession(onWorker)).toBe(true);
    expect(isWorkerSession(inThread)).toBe(false);
    const timing = lastWorkerRun(onWorker)!;
    expect(timing.runMs).toBeGreaterThan(0);
    expect(timing.totalMs).toBeGreaterThanOrEqual(timing.runMs + timing.fillMs);
    // The messages each way, on clocks that agree across threads: each within the round trip.
    for (const ms of [timing.toWorkerMs, timing.toMainMs]) {
      expect(ms).toBeGreaterThanOrEqual(-1);
      expect(ms).toBeLessThanOrEqual(timing.totalMs - timing.runMs + 1);
    }
    expect(lastWorkerRun(inThread)).toBeUndefined();
  });

  it("reuses the rows it wrote of a shared row across runs, and rewrites them for another row", async () => {
    const S = 3;
    const P = 4;
    const sharedRow = (seed: number) => {
      const row = new Float32Array(new SharedArrayBuffer(KV_HEADS * P * HEAD_DIM * 4));
      for (let i = 0; i < row.length; i++) row[i] = Math.sin(seed * 100 + i);
      return row;
    };
    const run = (rows: Float32Array[], B: number, session: ort.InferenceSession, repeat: boolean) => {
      const f = feeds(B, S, P);
      rows.forEach((row, i) => {
        const full = new Float32Array(B * row.length);
        for (let b = 0; b < B; b++) full.set(row, b * row.length);
        const name = `past_key_values.${i >> 1}.${i % 2 === 0 ? "key" : "value"}`;
        f[name] = new ort.Tensor("float32", repeat ? repeatedRowFeed(row, B) : full, [B, KV_HEADS, P, HEAD_DIM]);
      });
      return session.run(f, ["logits"]);
    };
    const first = Array.from({ length: 2 * LAYERS }, (_, i) => sharedRow(i + 1));
    const second = Array.from({ length: 2 * LAYERS }, (_, i) => sharedRow(i + 11));
    // Growing, shrinking and growing again over one row, then another row in the same buffers.
    for (const [rows, B] of [
      [first, 2],
      [first, 4],
      [first, 1],
      [first, 5],
      [second, 3],
      [first, 3],
    ] as const) {
      const want = await run(rows, B, inThread, false);
      expect((await run(rows, B, onWorker, true)).logits!.data).toEqual(want.logits!.data);
    }
  });

  it("keeps concurrent runs with repeated rows apart (the worker's row buffers are reused)", async () => {
    const [B, S, P] = [2, 3, 4];
    const run = (seed: number, session: ort.InferenceSession, repeat: boolean) => {
      const f = feeds(B, S, P);
      for (let l = 0; l < LAYERS; l++) {
        for (const kind of ["key", "value"]) {
          const row = Float32Array.from({ length: KV_HEADS * P * HEAD_DIM }, (_, i) => Math.sin(seed * 100 + i));
          const full = new Float32Array(B * row.length);
          for (let b = 0; b < B; b++) full.set(row, b * row.length);
          f[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", repeat ? repeatedRowFeed(row, B) : full, [
            B,
            KV_HEADS,
            P,
            HEAD_DIM,
          ]);
        }
      }
      return session.run(f, ["logits"]);
    };
    const got = await Promise.all([1, 2, 3].map((seed) => run(seed, onWorker, true)));
    for (const [i, seed] of [1, 2, 3].entries()) {
      expect(got[i]!.logits!.data).toEqual((await run(seed, inThread, false)).logits!.data);
    }
  });

  it("reads views of a SharedArrayBuffer without a copy on this side", async () => {
    const input = feeds(1, 4, 3);
    const shared: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(input)) {
      const data = t.data as Float32Array;
      const copy = new (data.constructor as Float32ArrayConstructor)(new SharedArrayBuffer(data.byteLength));
      copy.set(data);
      shared[name] = new ort.Tensor(t.type, copy as never, t.dims);
    }
    const got = await onWorker.run(shared, ["logits"]);
    expect(got.logits!.data).toEqual((await inThread.run(input, ["logits"])).logits!.data);
  });

  it("transfers a handed-over feed instead of copying it, and copies one that shares its buffer", async () => {
    const want = await inThread.run(feeds(2, 4, 3), ["logits"]);
    const input = feeds(2, 4, 3);
    const mask = handOver(input.attention_mask!.data as Float32Array);
    const ids = input.input_ids!.data as BigInt64Array;
    const sharing = new BigInt64Array(ids.length + 4);
    sharing.set(ids);
    input.input_ids = new ort.Tensor("int64", handOver(sharing.subarray(0, ids.length)), [2, 4]);
    const got = await onWorker.run(input, ["logits"]);
    expect(got.logits!.data).toEqual(want.logits!.data);
    expect(mask.buffer.byteLength).toBe(0); // transferred
    expect(sharing.length).toBe(ids.length + 4); // not alone on its buffer: copied
  });

  it("borrows a lent feed without a copy and gives it back, after a failed run too", async () => {
    const want = await inThread.run(feeds(2, 4, 3), ["logits"]);
    const input = feeds(2, 4, 3);
    const past = input["past_key_values.1.value"]!.data as Float32Array;
    const contents = past.slice();
    let back: Float32Array | undefined;
    input["past_key_values.1.value"] = new ort.Tensor(
      "float32",
      lend(past, (b) => (back = b)),
      [2, KV_HEADS, 3, HEAD_DIM],
    );
    const got = await onWorker.run(input, ["logits"]);
    expect(got.logits!.data).toEqual(want.logits!.data);
    expect(past.length).toBe(0); // transferred, not copied
    expect(back).toEqual(contents);

    const bad = feeds(2, 4, 3);
    delete bad.attention_mask;
    let again: Float32Array | undefined;
    bad["past_key_values.1.value"] = new ort.Tensor(
      "float32",
      lend(back!, (b) => (again = b)),
      [2, KV_HEADS, 3, HEAD_DIM],
    );
    await expect(onWorker.run(bad, ["logits"])).rejects.toThrow(/attention_mask/);
    expect(again).toEqual(contents);
  });

  it("borrows lent views of one buffer (a cache's store) by sending the buffer once, and gives each view back on it", async () => {
    const want = await inThread.run(feeds(1, 2, 3), ["logits"]);
    const input = feeds(1, 2, 3);
    const names = Object.keys(input).filter((n) => n.startsWith("past_key_values."));
    const size = (input[names[0]!]!.data as Float32Array).length;
    const store = new ArrayBuffer((names.length * size + 8) * 4); // room before the views: offsets are not 0
    const views = names.map((name, i) => {
      const view = new Float32Array(store, (8 + i * size) * 4, size);
      view.set(input[name]!.data as Float32Array);
      return view;
    });
    const contents = views.map((v) => v.slice());
    const back: Float32Array[] = [];
    names.forEach((name, i) => {
      input[name] = new ort.Tensor(
        "float32",
        lend(views[i]!, (b) => (back[i] = b)),
        [1, KV_HEADS, 3, HEAD_DIM],
      );
    });
    const got = await onWorker.run(input, ["logits"]);
    expect(got.logits!.data).toEqual(want.logits!.data);
    expect(store.byteLength).toBe(0); // transferred, not copied
    expect(back.map((v) => v.slice())).toEqual(contents);
    expect(new Set(back.map((v) => v.buffer)).size).toBe(1);
    expect(back.map((v) => v.byteOffset)).toEqual(views.map((_, i) => (8 + i * size) * 4));
  });

  it("poisons a repeatedRowFeed that reaches a session on this thread (NaN, not quietly wrong numbers)", async () => {
    const [B, S, P] = [2, 3, 4];
    const f = feeds(B, S, P);
    for (let l = 0; l < LAYERS; l++) {
      for (const kind of ["key", "value"]) {
        f[`past_key_values.${l}.${kind}`] = new ort.Tensor(
          "float32",
          repeatedRowFeed(new Float32Array(KV_HEADS * P * HEAD_DIM).fill(0.5), B),
          [B, KV_HEADS, P, HEAD_DIM],
        );
      }
    }
    const logits = (await inThread.run(f, ["logits"])).logits!.data as Float32Array;
    expect(logits.some((x) => Number.isNaN(x))).toBe(true);
  });

  it("fetches every output when given run options instead of output names", async () => {
    const out = await onWorker.run(feeds(1, 4, 0), { tag: "all" });
    expect(Object.keys(out).sort()).toEqual([...onWorker.outputNames].sort());
  });

  it("rejects a bad forward with ONNX Runtime's error and keeps serving", async () => {
    const bad = feeds(1, 4, 0);
    delete bad.attention_mask;
    await expect(onWorker.run(bad, ["logits"])).rejects.toThrow(/attention_mask/);
    const ok = await onWorker.run(feeds(1, 4, 0), ["logits"]);
    expect(ok.logits!.dims).toEqual([1, 4, VOCAB]);
  });

  it("refuses pre-allocated outputs", async () => {
    await expect(
      onWorker.run(feeds(1, 4, 0), { logits: new ort.Tensor("float32", new Float32Array(4 * VOCAB), [1, 4, VOCAB]) }),
    ).rejects.toThrow(/pre-allocated/);
  });

  it("keeps the event loop running during a forward", async () => {
    const input = feeds(8, 1024, 0);
    let ticks = 0;
    let maxGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ticks++;
    }, 2);
    const started = performance.now();
    await onWorker.run(input, ["logits"]);
    const runMs = performance.now() - started;
    clearInterval(timer);
    expect(runMs).toBeGreaterThan(30);
    expect(ticks).toBeGreaterThan(3);
    expect(maxGap).toBeLessThan(runMs / 2);
  });

  it("fails every request once released", async () => {
    const s = (await openSession(MODEL, { intraOpThreads: 1, worker: true })).session;
    await s.release();
    await s.release();
    await expect(s.run(feeds(1, 4, 0), ["logits"])).rejects.toThrow(/released/);
  });

  it("reports a model that cannot be opened", async () => {
    await expect(openSession(path.join(TINY_MODEL_DIR, "config.json"), { worker: true })).rejects.toThrow();
  });
});
