// The denoising trace (the playground's live view): which positions each forward commits, per
// block, on hand-written logits and through Generate on the tiny model; none without the option.
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  InferenceService,
  ResponseFormatType,
  Role,
  type GenerateResponse,
  type GenerateStep,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { silentLogger } from "../../../lib/logger.js";
import { DenoiseTrace, type DenoiseStep } from "../decoder/denoise-trace.js";
import { buildPolicy } from "../decoder/policies/registry.js";
import { StopMatcher } from "../decoder/reply-text.js";
import { Sequence, type DecodeModel } from "../decoder/sequence.js";
import { loadModelPool, type ModelPool } from "./model-pool.js";
import { inferenceRoutes } from "../server.js";
import { TINY_MODEL_DIR, recordingRunner, type RecordedForward } from "../../../test/helpers/inference-engine.js";

const V = 16;
const BLOCK = 8;
const EOS = 14;
const MODEL: DecodeModel = {
  blockSize: BLOCK,
  maxPositions: 64,
  vocabSize: V,
  maskTokenId: 15,
  eosTokenId: EOS,
  padTokenId: 13,
  kvShape: { layers: 1, heads: 1, headDim: 1 },
};
const decode = (ids: readonly number[]) => ids.map((i) => String.fromCharCode(97 + i)).join("");

function prefilled(prompt: number[], maxTokens: number): Sequence {
  const seq = new Sequence(MODEL, { prompt, maxTokens, policy: buildPolicy("threshold(0.9)"), stops: new StopMatcher([]), decode });
  while (!seq.prefilled) {
    const tokens = seq.prefillChunk(64);
    const present = new Float32Array(seq.kv.length + tokens.length);
    seq.applyPrefill({ present: [{ key: present, value: present }] }, 0, seq.kv.length, tokens.length, tokens.length);
  }
  return seq;
}

/** One traced forward: block position j gets token plan[j] with logit 20 (certain), the rest flat logits. */
function tracedStep(seq: Sequence, trace: DenoiseTrace, plan: Record<number, number>): DenoiseStep {
  const tokens = seq.stepTokens();
  const offset = seq.commitsBlock ? BLOCK : 0;
  const logits = new Float32Array(tokens.length * V);
  for (const [j, token] of Object.entries(plan)) logits[(offset + Number(j)) * V + token] = 20;
  const past = seq.kv.length;
  const present = new Float32Array(past + tokens.length);
  seq.applyStep({ logits, present: [{ key: present, value: present }] }, 0, past, tokens.length);
  return trace.afterForward();
}

describe("DenoiseTrace", () => {
  it("reports each forward's commits, its step within the block, and what stays masked", () => {
    // 10 prompt tokens: one prefilled block, two in the first generation block.
    const seq = prefilled([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 100);
    const trace = new DenoiseTrace(seq, BLOCK);
    expect(tracedStep(seq, trace, { 2: 3, 5: 4 })).toEqual({
      blockIndex: 0,
      step: 1,
      blockSize: BLOCK,
      replyStart: 2,
      committed: [
        { position: 2, tokenId: 3, forced: false },
        { position: 5, tokenId: 4, forced: false },
      ],
      masked: 4,
    });
    // Nothing confident: the single most confident position (the first, on a tie) is committed.
    expect(tracedStep(seq, trace, {})).toMatchObject({ step: 2, committed: [{ position: 3, tokenId: 0, forced: false }], masked: 3 });
    // The forward that completes the block: the sequence moves on, the trace still reports block 0.
    expect(tracedStep(seq, trace, { 4: 5, 6: 6, 7: 7 })).toMatchObject({
      blockIndex: 0,
      step: 3,
      committed: [
        { position: 4, tokenId: 5, forced: false },
        { position: 6, tokenId: 6, forced: false },
        { position: 7, tokenId: 7, forced: false },
      ],
      masked: 0,
    });
    // The next block starts at step 1, every position a reply position.
    expect(tracedStep(seq, trace, { 0: 9 })).toMatchObject({ blockIndex: 1, step: 1, replyStart: 0, masked: 7 });
  });

  it("the end of turn leaves the positions after it masked", () => {
    const seq = prefilled([1, 2, 3, 4, 5, 6, 7, 8], 100);
    const trace = new DenoiseTrace(seq, BLOCK);
    const step = tracedStep(seq, trace, { 0: 1, 1: EOS });
    expect(seq.done).toBe(true);
    expect(step).toMatchObject({ blockIndex: 0, step: 1, replyStart: 0, masked: 6 });
    expect(step.committed.map((c) => c.position)).toEqual([0, 1]);
  });
});

describe("Generate with include_denoising (tiny model)", () => {
  const logger = silentLogger();
  let pool: ModelPool;
  let client: Client<typeof InferenceService>;
  let forwards: RecordedForward[] = [];

  beforeAll(async () => {
    pool = await loadModelPool({
      models: [{ servingId: "textmodel-26b", dir: TINY_MODEL_DIR }],
      slots: 2,
      queue: 2,
      intraOpThreads: 1,
      logger,
      wrapRunner: (inner) => {
        const r = recordingRunner(inner);
        forwards = r.forwards;
        return r;
      },
    });
    client = createClient(InferenceService, createRouterTransport(inferenceRoutes({ pool, workerId: "w" })));
  });

  afterAll(async () => {
    await pool?.close();
  });

  async function events(includeDenoising: boolean, options: { jsonObject?: boolean } = {}): Promise<GenerateResponse["event"][]> {
    const out: GenerateResponse["event"][] = [];
    const messages = [{ role: Role.USER, content: [{ part: { case: "text" as const, value: "Tell me a story about a dog." } }] }];
    const responseFormat = options.jsonObject ? { type: ResponseFormatType.JSON_OBJECT } : undefined;
    for await (const res of client.generate({
      model: "textmodel-26b",
      messages,
      options: { maxTokens: 150, includeDenoising, responseFormat },
    })) {
      out.push(res.event);
    }
    return out;
  }

  /**
   * Checks the steps of one generation: one per denoising forward (and one more when grammar-
   * forced tokens ended the reply), numbered within each block, every reply position of a block
   * committed exactly once, each block's text after its last step. Returns the steps.
   */
  async function checkedSteps(options: { jsonObject?: boolean }): Promise<GenerateStep[]> {
    const before = forwards.length;
    const all = await events(true, options);
    const denoiseForwards = forwards.slice(before).filter((f) => f.fetch.output !== "none").length;
    const steps = all.flatMap((e) => (e.case === "step" ? [e.value] : []));
    const finished = all.at(-1);
    if (finished?.case !== "finished") throw new Error("no finished event");
    const endedByJump = steps.length === denoiseForwards + 1;
    expect(steps.length).toBe(denoiseForwards + (endedByJump ? 1 : 0));
    if (endedByJump) expect(steps.at(-1)!.committed.every((c) => c.forced)).toBe(true);
    expect(denoiseForwards).toBe(finished.value.forwardPasses - (forwards.length - before - denoiseForwards));

    const byBlock = new Map<number, GenerateStep[]>();
    for (const s of steps) byBlock.set(s.blockIndex, [...(byBlock.get(s.blockIndex) ?? []), s]);
    expect([...byBlock.keys()]).toEqual([...byBlock.keys()].map((_, i) => i));
    let replyTokens = 0;
    for (const [block, list] of byBlock) {
      const forwardSteps = endedByJump && block === byBlock.size - 1 ? list.slice(0, -1) : list;
      expect(forwardSteps.map((s) => s.step)).toEqual(forwardSteps.map((_, i) => i + 1));
      const positions = list.flatMap((s) => s.committed.map((c) => c.position));
      expect(new Set(positions).size).toBe(positions.length);
      expect(Math.min(...positions)).toBeGreaterThanOrEqual(list[0]!.replyStart);
      for (const s of list) for (const c of s.committed) expect(c.text).not.toBe("");
      const last = list.at(-1)!;
      if (block < byBlock.size - 1) expect(last.masked).toBe(0);
      expect(positions.length + last.masked).toBe(last.blockSize - list[0]!.replyStart);
      replyTokens += positions.length;
      // A block's text arrives after its last step.
      const lastStepAt = all.indexOf(all.find((e) => e.case === "step" && e.value === last)!);
      const deltaAt = all.findIndex((e) => e.case === "delta" && e.value.blockIndex === block);
      if (deltaAt !== -1) expect(deltaAt).toBeGreaterThan(lastStepAt);
    }
    // Overshoot past the end was committed too, then trimmed.
    expect(replyTokens).toBeGreaterThanOrEqual(finished.value.usage!.completionTokens);
    return steps;
  }

  it("sends one step per denoising forward, each position of a block committed once, before the block's text", async () => {
    const steps = await checkedSteps({});
    expect(steps.flatMap((s) => s.committed).some((c) => c.forced)).toBe(false);
  });

  it("under a grammar (json_object), reports grammar-forced tokens as forced, with the next forward's", async () => {
    const steps = await checkedSteps({ jsonObject: true });
    expect(steps.flatMap((s) => s.committed).some((c) => c.forced)).toBe(true);
  });

  it("sends no step without the option, and the same reply either way", async () => {
    const plain = await events(false);
    expect(plain.some((e) => e.case === "step")).toBe(false);
    const traced = await events(true);
    const text = (list: GenerateResponse["event"][]) =>
      list.flatMap((e) => (e.case === "delta" ? [e.value.content + e.value.reasoning] : [])).join("");
    expect(text(traced)).toBe(text(plain));
  });
});
