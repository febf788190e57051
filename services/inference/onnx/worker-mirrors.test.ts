import path from "node:path";
import type * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchBuilder } from "../decoder/batch.js";
import { createOrtRunner, type ForwardRunner, type KVShape } from "../decoder/forward.js";
import { SequenceKV } from "../decoder/kv-cache.js";
import { KVStorePool } from "../decoder/kv-pool.js";
import { openSession } from "./onnx-session.js";
import { lastWorkerRun, type WorkerSession } from "./onnx-worker-session.js";
import { MIRRORS_KEPT, type MirrorPatch, MirrorRegistry, type MirrorSource } from "./worker-mirrors.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";

const MODEL = path.join(TINY_MODEL_DIR, "model.onnx");
const SHAPE: KVShape = { layers: 2, heads: 2, headDim: 16 };
const BLOCK = 4;
const PAD = 0;

/** A reply decoded greedily by one token a step over `kv` (as a lone row of the step loop): each step's logits. */
async function decode(runner: ForwardRunner, kv: SequenceKV, prompt: number[], steps: number): Promise<Float32Array[]> {
  const prefill = new BatchBuilder(SHAPE, BLOCK, PAD, { roomToGrow: true });
  const inputs = prefill.build([{ kv, tokens: prompt }]);
  const out = await runner.run(inputs, { present: true, output: "none" });
  kv.append(out.present!, 0, inputs.past + inputs.seq, inputs.past, prompt.length);
  const builder = new BatchBuilder(SHAPE, 1, PAD, { roomToGrow: true });
  const logits: Float32Array[] = [];
  let token = prompt.at(-1)!;
  for (let i = 0; i < steps; i++) {
    const step = builder.build([{ kv, tokens: [token] }]);
    const got = await runner.run(step, { present: true, output: "logits" });
    logits.push(got.logits!.slice());
    kv.append(got.present!, 0, step.past + 1, step.past, 1);
    token = got.logits!.indexOf(Math.max(...got.logits!));
  }
  return logits;
}

describe("a lone reply's key/value store mirrored on the worker", () => {
  let inThread: ort.InferenceSession;
  let onWorker: WorkerSession;

  beforeAll(async () => {
    inThread = (await openSession(MODEL, { intraOpThreads: 1, worker: false })).session;
    onWorker = (await openSession(MODEL, { intraOpThreads: 1, worker: true })).session as WorkerSession;
  });
  afterAll(async () => {
    await inThread.release();
    await onWorker.release();
  });

  it("decodes as the in-thread session does, sending each step's new slots and keeping the store here", async () => {
    const prompt = [5, 17, 99, 3, 42, 8, 61, 7];
    const want = await decode(createOrtRunner(inThread, SHAPE), new SequenceKV(SHAPE, 40), prompt, 6);

    const kv = new SequenceKV(SHAPE, 40);
    const runner = createOrtRunner(onWorker, SHAPE);
    const buffers = new Set<ArrayBufferLike>();
    const watching: ForwardRunner = {
      run: async (inputs, fetch) => {
        const out = await runner.run(inputs, fetch);
        buffers.add(kv.storage().layers[0]!.key.buffer);
        return out;
      },
    };
    const got = await decode(watching, kv, prompt, 6);
    expect(got).toEqual(want);
    expect(onWorker.mirrorCopies).toBe(1);
    // The prompt's slots seeded the copy (the store lent once: a new ArrayBuffer object came
    // back); every step after sent only its slot: the store never left this thread again.
    expect(buffers.size).toBe(2);
    expect(lastWorkerRun(onWorker)!.fillMs).toBeGreaterThanOrEqual(0);
  });

  it("sends a pooled store's new reply afresh: the copy never answers with the previous reply's slots", async () => {
    const pool = new KVStorePool(1);
    const runner = createOrtRunner(onWorker, SHAPE);
    const first = new SequenceKV(SHAPE, 40, pool);
    await decode(runner, first, [9, 9, 9, 9, 1, 2, 3, 4], 4);
    const buffer = first.storage().layers[0]!.key.buffer;
    first.dispose();

    const prompt = [70, 71, 72, 73, 74];
    const want = await decode(createOrtRunner(inThread, SHAPE), new SequenceKV(SHAPE, 40), prompt, 5);
    const second = new SequenceKV(SHAPE, 40, pool);
    expect(second.storage().layers[0]!.key.buffer).toBe(buffer); // the same store, and so the same copy
    expect(await decode(runner, second, prompt, 5)).toEqual(want);
  });

  it("answers right after a failed run (its copies are sent afresh)", async () => {
    const runner = createOrtRunner(onWorker, SHAPE);
    const prompt = [11, 12, 13, 14, 15, 16];
    const want = await decode(createOrtRunner(inThread, SHAPE), new SequenceKV(SHAPE, 40), prompt, 3);
    const kv = new SequenceKV(SHAPE, 40);
    const builder = new BatchBuilder(SHAPE, 1, PAD, { roomToGrow: true });
    const bad = builder.build([{ kv, tokens: [1] }]);
    bad.inputIds = new BigInt64Array([BigInt(1e9)]); // out of the vocabulary: ONNX Runtime's Gather fails
    await expect(runner.run(bad, { present: true, output: "logits" })).rejects.toThrow();
    expect(await decode(runner, kv, prompt, 3)).toEqual(want);
  });
});

/** A source whose writer has written `written` positions, each one run of 4 floats at float offset 4 * position. */
function source(buffer: ArrayBuffer, writer: { written: number }): MirrorSource {
  return {
    buffer,
    changes: (since, most): { patch: MirrorPatch | undefined; upTo: number } => {
      const n = writer.written - since;
      if (n * 4 > most) return { patch: undefined, upTo: writer.written };
      const starts = Uint32Array.from({ length: n }, (_, i) => (since + i) * 4);
      return { patch: { starts, run: 4, data: new Float32Array(n * 4).fill(1) }, upTo: writer.written };
    },
  };
}

describe("MirrorRegistry", () => {
  it("sends a new copy, then only what changed, and a seed when most of the buffer changed", () => {
    const registry = new MirrorRegistry();
    const writer = { written: 2 };
    const src = source(new ArrayBuffer(4 * 4 * 64), writer);
    const first = registry.sync(src);
    expect(first.update?.patch?.starts).toEqual(Uint32Array.of(0, 4));
    expect(registry.sync(src).update).toBeUndefined(); // nothing new
    writer.written = 3;
    expect(registry.sync(src).update?.patch?.starts).toEqual(Uint32Array.of(8));
    writer.written = 60; // 57 positions: more than an eighth of the buffer
    expect(registry.sync(src)).toEqual({ id: first.id, update: { id: first.id, byteLength: 4 * 4 * 64, seed: true } });
    expect(registry.sync(src).update).toBeUndefined();
  });

  it("resends from the start for a new writer of the same buffer, and after forget", () => {
    const registry = new MirrorRegistry();
    const buffer = new ArrayBuffer(4 * 4 * 64);
    const writer = { written: 3 };
    const { id } = registry.sync(source(buffer, writer));
    const next = registry.sync(source(buffer, { written: 1 }));
    expect(next).toEqual({ id, update: { id, byteLength: buffer.byteLength, patch: expect.anything() } });
    expect(next.update!.patch!.starts).toEqual(Uint32Array.of(0));
    registry.forget([id]);
    expect(registry.takeDrops()).toEqual([id]);
    const again = registry.sync(source(buffer, writer));
    expect(again.id).not.toBe(id);
    expect(again.update!.patch!.starts).toEqual(Uint32Array.of(0, 4, 8));
  });

  it(`keeps at most ${MIRRORS_KEPT} copies, dropping the least recently fed`, () => {
    const registry = new MirrorRegistry();
    const sources = Array.from({ length: MIRRORS_KEPT + 1 }, () => source(new ArrayBuffer(1024), { written: 1 }));
    const ids = sources.map((s) => registry.sync(s).id);
    expect(registry.size).toBe(MIRRORS_KEPT);
    expect(registry.takeDrops()).toEqual([ids[0]]);
    expect(registry.sync(sources[0]!).update).toBeDefined(); // fed again: a new copy
  });
});
