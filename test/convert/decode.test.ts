import { writeFileSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModelRuntime, type ModelRuntime } from "../../services/inference/engine/runtime.js";
import { loadModelDir } from "../../services/inference/engine/model-dir.js";
import {
  type ConvertedFixtures,
  chatPrompt,
  convertedFixtures,
  HAVE_CONVERT_VENV,
  NO_VENV_MESSAGE,
  runConvertPython,
} from "../helpers/converted-models.js";
import { greedyTokens } from "../helpers/greedy-tokens.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const engines: ModelRuntime[] = [];
const scratch = mkdtempSync(join(tmpdir(), "tessera-decode-"));
afterAll(async () => {
  for (const e of engines) await e.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function engineFor(dir: string): Promise<ModelRuntime> {
  const model = await loadModelDir(dir, { worker: false });
  const { policy, threshold } = model.config.decoding;
  const engine = createModelRuntime({
    name: dir,
    servingIds: [],
    model,
    slots: 4,
    queue: 4,
    ...(policy !== undefined ? { policy } : {}),
    ...(threshold !== undefined ? { threshold } : {}),
  });
  engines.push(engine);
  return engine;
}

async function reference(checkpoint: string, modelDir: string, prompts: number[][], maxTokens: number): Promise<number[][]> {
  const file = join(scratch, `prompts-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(prompts));
  const { stdout } = await runConvertPython(["convert/tests/reference_decode.py", checkpoint, modelDir, file, String(maxTokens)]);
  return JSON.parse(stdout) as number[][];
}

describe.skipIf(!HAVE_CONVERT_VENV)("converted models: the engine's greedy decode equals the family's own decoding rule", () => {
  let fx: ConvertedFixtures;
  beforeAll(async () => {
    fx = await convertedFixtures();
  }, 600_000);

  it("SDAR: low_confidence_dynamic at threshold 0.9 (blocks of 4), token for token", async () => {
    const engine = await engineFor(fx.models.sdar);
    expect(engine.policy.name).toMatch(/^threshold\(confidence=0\.9\)$/);
    const prompts = [chatPrompt(engine, "What is the weather in Paris?"), chatPrompt(engine, "Hi!").slice(0, 12)];
    expect(prompts[1]!.length % 4).toBe(0); // one prompt ends on a block boundary
    const want = await reference(fx.checkpoints.sdar, fx.models.sdar, prompts, 24);
    for (const w of want) expect(w.length).toBeGreaterThan(8); // real replies, not an immediate stop
    expect(new Set(want.flat()).size).toBeGreaterThan(2);
    for (let i = 0; i < prompts.length; i++) expect(await greedyTokens(engine, prompts[i]!, 24)).toEqual(want[i]);
  }, 300_000);

  it("Fast-dLLM v2: token shift and sub-blocks of 8 in blocks of 32, token for token (a prompt on a block boundary too)", async () => {
    const engine = await engineFor(fx.models.fastDllm);
    expect(engine.policy.name).toMatch(/subblocks\(size=8,confident=1\.01\).*threshold\(confidence=0\.9\)/);
    const chat = chatPrompt(engine, "What is the weather in Paris?");
    const prompts = [chat, chat.slice(0, 32)];
    const want = await reference(fx.checkpoints.fastDllm, fx.models.fastDllm, prompts, 40);
    for (const w of want) expect(w.length).toBeGreaterThan(8);
    expect(new Set(want.flat()).size).toBeGreaterThan(2);
    for (let i = 0; i < prompts.length; i++) expect(await greedyTokens(engine, prompts[i]!, 40)).toEqual(want[i]);
  }, 300_000);
});
