import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { BLOCKED } from "../decoder/batch.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";
import { threadFlushesDenormals } from "./onnx-denormals.js";
import { openSession } from "./onnx-session.js";
import { WorkerSession } from "./onnx-worker-session.js";

const MODEL = path.join(TINY_MODEL_DIR, "model.onnx");

/** A block-causal prefill of `S` tokens (blocks of 8): the masked entries are where a softmax makes denormals. */
function blockCausalPrefill(session: ort.InferenceSession, S: number): Record<string, ort.Tensor> {
  const mask = new Float32Array(S * S);
  for (let i = 0; i < S; i++) mask.fill(BLOCKED, i * S + Math.min(S, (Math.floor(i / 8) + 1) * 8), (i + 1) * S);
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: S }, (_, i) => BigInt(5 + ((i * 37) % 400))),
      [1, S],
    ),
    position_ids: new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: S }, (_, i) => BigInt(i)),
      [1, S],
    ),
    attention_mask: new ort.Tensor("float32", mask, [1, 1, S, S]),
  };
  for (const name of session.inputNames.filter((n) => n.startsWith("past_key_values."))) {
    feeds[name] = new ort.Tensor("float32", new Float32Array(0), [1, 2, 0, 16]);
  }
  return feeds;
}

describe("session workers started by the host thread", () => {
  it("flush denormals, every one of them, while this thread keeps IEEE arithmetic", async () => {
    // ONNX Runtime sets the modes for the process's first session only: without the host, the
    // second and later workers of a process computed with denormals.
    for (let i = 0; i < 3; i++) {
      const { session } = await openSession(MODEL, { intraOpThreads: 1, worker: true });
      expect(session).toBeInstanceOf(WorkerSession);
      expect((session as WorkerSession).flushesDenormals).toBe(true);
      await session.release();
    }
    expect(threadFlushesDenormals()).toBe(false);
    expect(Number("1e-310")).toBeGreaterThan(0);
    expect(JSON.parse("[2.5e-320]")[0]).toBe(2.5e-320);
  });

  it("compute what a session on this thread computes, over a block-causal mask", async () => {
    const inThread = (await openSession(MODEL, { intraOpThreads: 1, worker: false })).session;
    const onWorker = (await openSession(MODEL, { intraOpThreads: 1, worker: true })).session;
    try {
      const feeds = blockCausalPrefill(inThread, 40);
      const want = await inThread.run(feeds);
      const got = await onWorker.run(feeds);
      for (const name of ["logits", "present.1.key", "present.1.value"]) {
        const a = want[name]!.data as Float32Array;
        const b = got[name]!.data as Float32Array;
        expect(b.length).toBe(a.length);
        let worst = 0;
        for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
        // Only values below 1.2e-38 are flushed: nothing a logit can show.
        expect(worst).toBeLessThanOrEqual(1e-6);
      }
    } finally {
      await inThread.release();
      await onWorker.release();
    }
  });

  it("let the process exit once idle, and keep it open while a forward is pending or a worker is stopping", async () => {
    const script = (body: string) => `
      import * as ort from "onnxruntime-node";
      import { openSession } from ${JSON.stringify(new URL("./onnx-session.ts", import.meta.url).href)};
      const { session } = await openSession(${JSON.stringify(MODEL)}, { intraOpThreads: 1, worker: true });
      ${body}`;
    const run = (body: string) =>
      promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script(body)], { timeout: 30_000 });
    // Opened and idle: the process ends by itself.
    expect((await run(`console.log("opened", session.flushesDenormals);`)).stdout.trim()).toBe("opened true");
    // A forward started and not awaited still answers; a release not awaited still finishes.
    const pending = await run(`
      const feeds = { input_ids: new ort.Tensor("int64", new BigInt64Array([1n]), [1, 1]) };
      session.run(feeds).catch((err) => console.log("answered:", String(err).includes("missing")));`);
    expect(pending.stdout.trim()).toBe("answered: true");
    const released = await run(`session.release().then(() => console.log("released"));`);
    expect(released.stdout.trim()).toBe("released");
  }, 60_000);

  it("report that they compute with denormals when another session opened first in the process", async () => {
    // ONNX Runtime applies the option of the process's first session only: here a session on
    // the main thread, without it, comes first (what the model loader warns about).
    const script = `
      import * as ort from "onnxruntime-node";
      import { openSession } from ${JSON.stringify(new URL("./onnx-session.ts", import.meta.url).href)};
      await ort.InferenceSession.create(${JSON.stringify(MODEL)});
      const { session } = await openSession(${JSON.stringify(MODEL)}, { intraOpThreads: 1, worker: true });
      console.log("flushes", session.flushesDenormals);
      await session.release();`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      timeout: 30_000,
    });
    expect(stdout.trim()).toBe("flushes false");
  }, 60_000);
});
