import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, runConvertPython } from "../../../../test/helpers/converted-models.js";
import { type DiffusionGemmaFixture, diffusionGemmaFixture } from "../../../../test/convert/diffusion-gemma-fixture.js";
import { CanvasDecoder, type CanvasStepEvent, seededDraws } from "./canvas-decoder.js";
import { type CanvasModel, loadCanvasModel } from "./canvas-model.js";
import type { CommittedLogprob } from "../logprobs.js";
import { createLogger } from "../../../../lib/logger.js";
import { recordingDraws } from "../../../../test/helpers/recording-draws.js";

describe.skipIf(!HAVE_CONVERT_VENV)("canvas decoding on the tiny converted DiffusionGemma (real ONNX Runtime)", () => {
  let fx: DiffusionGemmaFixture;
  let model: CanvasModel;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-canvas-"));
  const prompt = (text: string) =>
    model.tokenizer.encode(model.renderChat({ messages: [{ role: "user", content: text }], add_generation_prompt: true }));
  beforeAll(async () => {
    fx = await diffusionGemmaFixture();
    model = await loadCanvasModel(fx.model, { intraOpThreads: 1 });
  }, 300_000);
  afterAll(async () => {
    await model?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("equals transformers' own generate, token for token over three canvases, given the same random draws; so do its logprobs", async () => {
    const log: [string, number[]][] = [];
    const promptIds = prompt("Hello! How are you today?");
    const steps: CanvasStepEvent[] = [];
    const streamed: number[] = [];
    const logprobs: CommittedLogprob[] = [];
    const r = await new CanvasDecoder(model).generate({
      promptIds,
      maxTokens: 40,
      draws: recordingDraws(seededDraws(5), log),
      logprobs: { top: 3 },
      onStep: (e) => steps.push(e),
      onCanvas: (canvas) => {
        streamed.push(...canvas.tokens);
        logprobs.push(...(canvas.logprobs ?? []));
        return undefined;
      },
    });
    const file = join(scratch, "draws.json");
    writeFileSync(file, JSON.stringify({ prompt: promptIds, max_new_tokens: 40, draws: log, top_logprobs: 3 }));
    const { stdout } = await runConvertPython(["convert/tests/canvas_reference_decode.py", fx.checkpoint, file], 120_000);
    const ref = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      sequence: number[];
      draws_used: number;
      logprobs: { token: number; logprob: number; top: [number, number][] }[];
    };
    expect(ref.draws_used).toBe(log.length); // transformers consumed exactly the engine's draws
    expect(r.tokens).toEqual(ref.sequence.slice(0, r.tokens.length));
    expect(r.tokens.length).toBe(40);
    expect(r.finishReason).toBe("length");
    expect(r.canvases).toBe(3);
    // Streaming: a step event per denoiser step, the canvases' tokens in order.
    expect(steps.length).toBe(r.steps);
    expect(streamed).toEqual(r.tokens);
    expect(r.tokensPerStep).toBeCloseTo(40 / r.steps, 9);
    expect(steps.some((s) => s.accepted > 1)).toBe(true);
    // Each canvas's last step is flagged, and its draft is the canvas the reply took.
    const lastSteps = steps.filter((s) => s.last);
    expect(lastSteps.map((s) => s.canvasIndex)).toEqual([0, 1, 2]);
    expect(lastSteps.flatMap((s) => s.draft).slice(0, 40)).toEqual(r.tokens);
    expect(steps.every((s) => s.acceptedMask.filter(Boolean).length === s.accepted)).toBe(true);
    // Logprobs: the raw logits (no temperature) of each canvas's last step, as transformers' give them.
    expect(logprobs.map((e) => e.token)).toEqual(r.tokens);
    expect(logprobs.map((e) => e.step)).toEqual(r.tokens.map((_, i) => lastSteps[Math.floor(i / model.config.canvasLength)]!.step));
    for (const [i, e] of logprobs.entries()) {
      const want = ref.logprobs[i]!;
      expect(want.token).toBe(e.token);
      expect(Math.abs(e.logprob - want.logprob)).toBeLessThan(1e-3);
      expect(e.top.map((t) => t.token)).toEqual(want.top.map(([t]) => t));
      for (const [j, t] of e.top.entries()) expect(Math.abs(t.logprob - want.top[j]![1])).toBeLessThan(1e-3);
      // The reply token is its step's argmax, so it leads its own alternatives.
      expect(e.top[0]!.token).toBe(e.token);
    }
  }, 180_000);

  it("a canvas whose onCanvas returns true ends the reply there (a stop sequence): no further canvas is denoised", async () => {
    const canvases: number[] = [];
    const r = await new CanvasDecoder(model).generate({
      promptIds: prompt("Tell me a story"),
      maxTokens: 200,
      draws: seededDraws(11),
      onCanvas: ({ canvasIndex }) => {
        canvases.push(canvasIndex);
        return canvasIndex === 1;
      },
    });
    // (Seed 11's first canvas holds no stop token, so it is the callback that ends the reply.)
    expect(r.finishReason).toBe("stop");
    expect(canvases).toEqual([0, 1]);
    expect(r.canvases).toBe(2);
    expect(r.tokens.length).toBe(2 * model.config.canvasLength);
  }, 60_000);

  it("batches rows into one forward per step, each row's reply the same as alone", async () => {
    const a = prompt("The weather in Paris");
    const b = prompt("0123456789 the quick brown fox jumps over the lazy dog");
    const alone = new CanvasDecoder(model);
    const ra = await alone.generate({ promptIds: a, maxTokens: 20, draws: seededDraws(1) });
    const rb = await alone.generate({ promptIds: b, maxTokens: 20, draws: seededDraws(2) });
    const together = new CanvasDecoder(model);
    const [ta, tb] = await Promise.all([
      together.generate({ promptIds: a, maxTokens: 20, draws: seededDraws(1) }),
      together.generate({ promptIds: b, maxTokens: 20, draws: seededDraws(2) }),
    ]);
    expect(ta.tokens).toEqual(ra.tokens);
    expect(tb.tokens).toEqual(rb.tokens);
    expect(together.stats.rowSteps).toBe(ra.steps + rb.steps);
    expect(together.stats.forwards).toBeLessThan(together.stats.rowSteps); // rows shared forwards
  }, 120_000);

  it("a cancelled row stops at its next step and rejects; the others finish", async () => {
    const decoder = new CanvasDecoder(model);
    const controller = new AbortController();
    let stepsAfterAbort = 0;
    const cancelled = decoder.generate({
      promptIds: prompt("Hello"),
      maxTokens: 200,
      draws: seededDraws(3),
      signal: controller.signal,
      onStep: () => {
        if (controller.signal.aborted) stepsAfterAbort++;
        controller.abort(new Error("client went away"));
      },
    });
    const other = decoder.generate({ promptIds: prompt("Yes, no, maybe."), maxTokens: 16, draws: seededDraws(4) });
    await expect(cancelled).rejects.toThrow("client went away");
    expect(stepsAfterAbort).toBe(0);
    expect((await other).tokens.length).toBeGreaterThan(0);
  }, 120_000);

  // No Vulkan loader on this process's library path: WebGPU finds no adapter (canvas-webgpu.test.ts runs it where one is).
  const noVulkan = !(process.env.LD_LIBRARY_PATH ?? "").includes("chromium") && process.env.VK_ICD_FILENAMES === undefined;
  it.skipIf(!noVulkan)(
    "asked for WebGPU without an adapter: fails naming the fix, or opens on the CPU where TESSERA_GPU_FALLBACK=cpu allows",
    async () => {
      const err = await loadCanvasModel(fx.model, { executionProviders: ["webgpu"] }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/denoiser\.onnx: no WebGPU adapter .*Fix: install the GPU.s Vulkan driver/s);
      const lines: string[] = [];
      const logger = createLogger({ destination: { write: (line: string) => lines.push(line) } as never });
      const onCpu = await loadCanvasModel(fx.model, { executionProviders: ["webgpu"], fallback: "cpu", logger, intraOpThreads: 1 });
      try {
        expect(onCpu.executionProviders).toEqual(["cpu"]);
        expect(onCpu.device).toBeUndefined();
        expect(lines.some((l) => /TESSERA_GPU_FALLBACK=cpu/.test(l))).toBe(true);
      } finally {
        await onCpu.close();
      }
    },
  );
});
