import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type Llama, LlamaLogLevel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConvertedFixtures,
  convertedFixtures,
  HAVE_CONVERT_VENV,
  NO_VENV_MESSAGE,
  runConvertPython,
} from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const scratch = mkdtempSync(join(tmpdir(), "tessera-gguf-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const PROMPTS = [
  [1, 2, 3, 50, 60, 70, 80],
  [120, 33, 240, 7, 300, 12, 44, 91, 5],
  [200, 201, 202, 10, 11],
];
const MAX_TOKENS = 12;

async function writeGguf(checkpoint: string, type: string): Promise<string> {
  const out = join(scratch, `${checkpoint.split("/").at(-1)}-${type}.gguf`);
  await runConvertPython(["bench/cpu_peer/to_gguf.py", checkpoint, out, "--type", type]);
  return out;
}

/** llama.cpp's greedy continuation of each prompt, and the probability it gives each token next after the prompt. */
async function llamaGreedy(llama: Llama, file: string): Promise<{ replies: number[][]; next: Map<number, number>[] }> {
  const model = await llama.loadModel({ modelPath: file });
  const context = await model.createContext({ contextSize: 256, threads: 1 });
  try {
    const replies: number[][] = [];
    const next: Map<number, number>[] = [];
    for (const prompt of PROMPTS) {
      const seq = context.getSequence();
      const out = await seq.controlledEvaluate(
        prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { probabilities: true } }] : t)) as never,
      );
      next.push(out.at(-1)!.next.probabilities! as Map<number, number>);
      await seq.clearHistory();
      const reply: number[] = [];
      for await (const t of seq.evaluate(prompt as Token[], { temperature: 0 })) {
        reply.push(t as number);
        if (reply.length >= MAX_TOKENS) break;
      }
      replies.push(reply);
      seq.dispose();
    }
    return { replies, next };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

async function transformersGreedy(checkpoint: string): Promise<number[][]> {
  const file = join(scratch, `request-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ generate: { prompts: PROMPTS, max_tokens: MAX_TOKENS, stops: [1_000_000] } }));
  const { stdout } = await runConvertPython(["convert/tests/ar_reference.py", checkpoint, file]);
  return (JSON.parse(stdout) as { generate: number[][] }).generate;
}

describe.skipIf(!HAVE_CONVERT_VENV)("bench/cpu_peer/to_gguf.py: the checkpoint as llama.cpp reads it (node-llama-cpp)", () => {
  let fx: ConvertedFixtures;
  let llama: Llama;
  beforeAll(async () => {
    fx = await convertedFixtures();
    llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  }, 600_000);
  afterAll(async () => {
    await llama?.dispose();
  });

  for (const family of ["qwen3", "qwen2"] as const) {
    it(`${family}: float32 GGUF: llama.cpp's greedy tokens equal transformers' generate, token for token`, async () => {
      const want = await transformersGreedy(fx.checkpoints[family]);
      const got = await llamaGreedy(llama, await writeGguf(fx.checkpoints[family], "f32"));
      expect(got.replies).toEqual(want);
      for (const [i, reply] of want.entries()) {
        const top = [...got.next[i]!.entries()][0]!;
        expect(top[0]).toBe(reply[0]);
      }
    }, 300_000);
  }

  it("qwen3: Q8_0 GGUF is a quarter of float32 and gives the same next-token distribution within quantization noise", async () => {
    const f32 = await writeGguf(fx.checkpoints.qwen3, "f32");
    const q8 = await writeGguf(fx.checkpoints.qwen3, "q8_0");
    expect(statSync(q8).size).toBeLessThan(statSync(f32).size * 0.4);
    const [a, b] = [await llamaGreedy(llama, f32), await llamaGreedy(llama, q8)];
    for (const [i, p] of a.next.entries()) {
      let tv = 0;
      for (const [token, prob] of p) tv += Math.abs(prob - (b.next[i]!.get(token) ?? 0));
      expect(tv / 2).toBeLessThan(0.1); // total variation distance
      expect([...b.next[i]!.keys()][0]).toBe([...p.keys()][0]);
    }
  }, 300_000);
});
