import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CanvasDecoder, seededDraws } from "../../services/inference/decoder/canvas/canvas-decoder.js";
import { loadCanvasModel } from "../../services/inference/decoder/canvas/canvas-model.js";
import { HAVE_CONVERT_VENV, runConvertPython } from "../helpers/converted-models.js";
import { diffusionGemmaFixture, type TinyLayerPattern } from "./diffusion-gemma-fixture.js";
import { recordingDraws } from "../helpers/recording-draws.js";

// The fixture's own pattern (sliding, full, sliding, full) is covered by diffusion-gemma.test.ts and canvas-decoder.test.ts.
const PATTERNS: { pattern: TinyLayerPattern; types: string[]; encoderMasks: string[]; denoiserMasks: string[] }[] = [
  {
    // transformers' default: the last layer alone is full, and its attention output is dead code in the encoder.
    pattern: "default",
    types: ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    encoderMasks: ["sliding_attention_mask"],
    denoiserMasks: ["full_attention_mask", "sliding_attention_mask"],
  },
  {
    pattern: "full",
    types: ["full_attention", "full_attention", "full_attention", "full_attention"],
    encoderMasks: ["full_attention_mask"],
    denoiserMasks: ["full_attention_mask"],
  },
];

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma layer patterns beyond the fixture's: converted, checked and decoded", () => {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-dg-patterns-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  for (const { pattern, types, encoderMasks, denoiserMasks } of PATTERNS) {
    it(`${pattern}: fp32 check within 1e-3, each graph fed only the masks it declares, and the engine's reply equals transformers' generate`, async () => {
      const fx = await diffusionGemmaFixture(pattern, ["--weights", "fp32"]);
      for (const v of Object.values(fx.summary.check)) expect(v).toBeLessThan(1e-3);
      const model = await loadCanvasModel(fx.model, { intraOpThreads: 1 });
      try {
        expect(model.config.layers.map((l) => l.type)).toEqual(types);
        const masks = (names: readonly string[]) => names.filter((n) => n.endsWith("_attention_mask"));
        expect(masks(model.encoder.inputNames)).toEqual(encoderMasks);
        expect(masks(model.denoiser.inputNames)).toEqual(denoiserMasks);
        const promptIds = model.tokenizer.encode(
          model.renderChat({ messages: [{ role: "user", content: "The weather in Paris" }], add_generation_prompt: true }),
        );
        const log: [string, number[]][] = [];
        const r = await new CanvasDecoder(model).generate({ promptIds, maxTokens: 24, draws: recordingDraws(seededDraws(7), log) });
        const file = join(scratch, `${pattern}.json`);
        writeFileSync(file, JSON.stringify({ prompt: promptIds, max_new_tokens: 24, draws: log }));
        const { stdout } = await runConvertPython(["convert/tests/canvas_reference_decode.py", fx.checkpoint, file], 120_000);
        const ref = JSON.parse(stdout.trim().split("\n").at(-1)!) as { sequence: number[]; draws_used: number };
        expect(ref.draws_used).toBe(log.length);
        expect(r.tokens.length).toBeGreaterThan(0);
        expect(r.tokens).toEqual(ref.sequence.slice(0, r.tokens.length));
      } finally {
        await model.close();
      }
    }, 300_000);
  }
});
