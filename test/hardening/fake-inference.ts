import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { FinishReason, type InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { SlotPool } from "../../services/inference/core/slots.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

export interface FakeInferenceOptions {
  /** Generation slots (a real SlotPool) and its wait queue. */
  slots?: number;
  queue?: number;
  /** Delta events per generation at most (max_tokens lowers it). Default 1. */
  deltas?: number;
  /** Characters of each delta's content. */
  deltaChars?: number;
}

export interface FakeInferenceWorker {
  impl: Partial<ServiceImpl<typeof InferenceService>>;
  slots: SlotPool;
  /** Generations begun, cancelled by their caller (signal aborted), and finished; content characters produced. */
  counts: { started: number; cancelled: number; finished: number; contentChars: number };
}

const countOf = (text: string) => Math.ceil(text.length / 4);

/**
 * An inference worker without a model, behind real generation slots: it answers at once, so
 * the gateway's whole request path (validation, registry, accounting, Connect to a remote
 * worker, response mapping, SSE) is exercised at thousands of requests a second; or it
 * streams max_tokens large deltas, to show what a slow or stalled client does to a slot. Decisions read the
 * tiny test model's decision.json and score every option alike.
 */
export function createFakeInferenceWorker(options: FakeInferenceOptions = {}): FakeInferenceWorker {
  const slots = new SlotPool("fake", options.slots ?? 4, options.queue ?? 16);
  const counts = { started: 0, cancelled: 0, finished: 0, contentChars: 0 };
  const decision = JSON.parse(readFileSync(join(TINY_MODEL_DIR, "decision.json"), "utf8")) as JsonObject;
  const maxDeltas = options.deltas ?? 1;
  const content = "x".repeat(options.deltaChars ?? 8);

  const impl: Partial<ServiceImpl<typeof InferenceService>> = {
    countTokens(req) {
      let chars = req.text.length;
      for (const m of req.messages) for (const p of m.content) if (p.part.case === "text") chars += p.part.value.length;
      return { tokens: Math.ceil(chars / 4) };
    },
    getModelInfo(req) {
      return { model: req.model, maxPositions: 1_000_000, blockSize: 64, decision, slotsTotal: slots.total, slotsFree: slots.free };
    },
    score(req) {
      const prefixTokens = countOf(req.prefix);
      const results = req.suffixes.map((s) => ({ logits: s.labels.map((_, i) => -i / 10), suffixTokens: countOf(s.text) + 1 }));
      return { results, prefixTokens, inputTokens: prefixTokens + results.reduce((n, r) => n + r.suffixTokens, 0) };
    },
    async *generate(req, ctx) {
      await slots.acquire(ctx.signal);
      counts.started++;
      const deltas = Math.min(maxDeltas, req.options?.maxTokens || maxDeltas);
      let sent = 0;
      try {
        yield { event: { case: "started", value: { model: req.model, promptTokens: 1, workerId: "fake" } } };
        for (; sent < deltas; sent++) {
          if (ctx.signal.aborted) return;
          // Let cancellation and other requests in between events.
          if (sent % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
          counts.contentChars += content.length;
          yield { event: { case: "delta", value: { content, blockIndex: sent, completionTokens: sent + 1 } } };
        }
        yield {
          event: {
            case: "finished",
            value: { finishReason: FinishReason.STOP, usage: { promptTokens: 1, completionTokens: sent, totalTokens: 1 + sent } },
          },
        };
        counts.finished++;
      } finally {
        if (ctx.signal.aborted) counts.cancelled++;
        slots.release();
      }
    },
  };
  return { impl, slots, counts };
}
