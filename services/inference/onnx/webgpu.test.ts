// The WebGPU provider on this CPU through SwiftShader (Debian's chromium package ships it; .ci/run
// installs chromium): the tiny model served on the CPU provider and on WebGPU answers the same
// requests alike, the key/values never cross between host and device, and every device tensor
// is given back — after the parity runs, a cancelled request, a failed one, and 100 requests.
// The scenarios run in a child process (test/helpers/webgpu-scenarios.ts): the Vulkan loader is
// found through LD_LIBRARY_PATH, which the dynamic loader reads only when a process starts.
import { describe, expect, it } from "vitest";
import { haveSwiftShader, runWithSwiftShader, SWIFTSHADER_ICD } from "../../../test/helpers/swiftshader.js";

if (!haveSwiftShader) {
  console.warn(
    `webgpu.test.ts skipped: no SwiftShader Vulkan driver at ${SWIFTSHADER_ICD} (install Debian's chromium package, as .ci/run does)`,
  );
}

/**
 * Decision values (logits, or log-probabilities for multi-token labels) may differ by this much:
 * the emulated GPU's float arithmetic is not the CPU provider's (other summation orders, and
 * SwiftShader's exp); measured up to 0.0126 on the tiny model (a two-token label's summed
 * log-probabilities, in the chunked questions). Greedy replies must be equal.
 */
const DECISION_TOLERANCE = 0.02;

interface Reply {
  content: string;
  reasoning: string;
  reason: number;
}
interface ProviderRuns {
  single: Reply[];
  batch: Reply[];
  decisionOne: number[][];
  decisionFour: number[][];
  /** Questions longer than a decision forward may be: chunked, each over a cache of its own. */
  decisionChunked: { logits: number[][]; prefills: number };
}
interface Held {
  tensors: number;
  bytes: number;
}
interface Scenarios {
  providers: string[];
  headAt: boolean;
  baseline: Held;
  cpu: ProviderRuns;
  webgpu: ProviderRuns;
  afterChunked: Held;
  afterParity: Held;
  transfer: Record<string, number>;
  forwards: Record<string, number>;
  cancelHeld: number;
  cancelled: string;
  afterCancel: Held;
  failed: string;
  afterFail: Held;
  hundred: Held & { peakBytes: number };
  gauge: Record<string, number>;
  timings: Record<string, number>;
}

describe.skipIf(!haveSwiftShader)("WebGPU provider (SwiftShader)", () => {
  it("answers as the CPU provider does, keeps the key/values on the device and gives every tensor back", async () => {
    const s = await runWithSwiftShader<Scenarios>("test/helpers/webgpu-scenarios.ts", 280_000);
    console.info("webgpu scenario timings (ms):", JSON.stringify(s.timings));
    expect(s.providers).toEqual(["webgpu", "cpu"]);
    expect(s.headAt).toBe(true);

    // Greedy replies: the same text, batch 1 and a batch of 4 of different lengths, thinking and a JSON schema among them.
    expect(s.webgpu.single).toEqual(s.cpu.single);
    expect(s.webgpu.batch).toEqual(s.cpu.batch);
    const [, , thinking, constrained] = s.webgpu.batch;
    expect(thinking!.reasoning.length).toBeGreaterThan(0);
    expect(constrained!.content.startsWith('{"answer": "')).toBe(true);
    // Decision values: one question, then four (single- and multi-token labels).
    for (const [gpu, cpu] of [
      [s.webgpu.decisionOne, s.cpu.decisionOne],
      [s.webgpu.decisionFour, s.cpu.decisionFour],
      [s.webgpu.decisionChunked.logits, s.cpu.decisionChunked.logits],
    ] as const) {
      expect(gpu.map((r) => r.length)).toEqual(cpu.map((r) => r.length));
      gpu.forEach((row, i) => {
        row.forEach((v, j) => {
          expect(Math.abs(v - cpu[i]![j]!)).toBeLessThanOrEqual(DECISION_TOLERANCE);
        });
      });
    }

    // The chunked questions went through caches of their own: the state's block and, per
    // question, its head in more than one chunk (the same forwards on both providers).
    expect(s.webgpu.decisionChunked.prefills).toBe(s.cpu.decisionChunked.prefills);
    expect(s.webgpu.decisionChunked.prefills).toBeGreaterThanOrEqual(1 + 2 * 2);

    // The key/values never cross: prefills and committing steps ran, and 0 bytes of KV moved.
    expect(s.forwards["tiny-model/prefill"]).toBeGreaterThan(0);
    expect(s.transfer["tiny-model/to_device/kv"]).toBe(0);
    expect(s.transfer["tiny-model/to_host/kv"]).toBe(0);
    expect(s.transfer["tiny-model/to_device/other"]).toBeGreaterThan(0);
    expect(s.transfer["tiny-model/to_host/other"]).toBeGreaterThan(0);

    // Device memory back to its baseline after each phase.
    const none = { tensors: 0, bytes: 0 };
    expect(s.baseline).toEqual(none);
    expect(s.afterChunked).toEqual(none);
    expect(s.afterParity).toEqual(none);
    expect(s.cancelHeld).toBeGreaterThan(0);
    expect(s.cancelled).toMatch(/canceled/);
    expect(s.afterCancel).toEqual(none);
    expect(s.failed).toMatch(/injected model failure/);
    expect(s.afterFail).toEqual(none);
    expect(s.hundred.peakBytes).toBeGreaterThan(0);
    expect({ tensors: s.hundred.tensors, bytes: s.hundred.bytes }).toEqual(none);
    expect(s.gauge["tiny-model"]).toBe(0);
  }, 300_000);
});
