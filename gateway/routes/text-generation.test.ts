// A cut SSE stream is charged from the engine's own count: the last delta's completion_tokens.
import { EventEmitter } from "node:events";
import { create } from "@bufbuild/protobuf";
import { describe, expect, it, vi } from "vitest";
import type { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { GenerateRequestSchema, GenerateResponseSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { SettleUsage } from "../gate.js";
import type { RequestContext } from "../route.js";
import { answerGeneration, type TextGeneration } from "./text-generation.js";

const started = create(GenerateResponseSchema, { event: { case: "started", value: { promptTokens: 9 } } });
const delta = (completionTokens: number, content: string) =>
  create(GenerateResponseSchema, { event: { case: "delta", value: { content, completionTokens } } });

describe("a generation stream the client leaves", () => {
  it("is charged its prompt and the completion_tokens of the last delta passed on, with no token count", async () => {
    const countTokens = vi.fn(async () => ({ tokens: 1 }));
    const generation = {
      servingId: "m",
      shownModel: "m",
      request: create(GenerateRequestSchema, { model: "m" }),
      inference: {
        countTokens,
        async *generate() {
          yield started;
          // A block of 64 tokens whose text is two characters: re-tokenizing the text would say 1.
          yield delta(64, "hi");
          yield delta(128, " there");
        },
      },
      tokensOf: async () => 1,
    } as unknown as TextGeneration;
    const settled: SettleUsage[] = [];
    const checkpoints: SettleUsage[] = [];
    const res = Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false, writableFinished: false });
    const ctx = {
      res,
      signal: new AbortController().signal,
      log: {},
      settle: async (_kind: UsageKind, usage: SettleUsage) => void settled.push(usage),
      checkpoint: (_kind: UsageKind, usage: SettleUsage) => void checkpoints.push(usage),
    } as unknown as RequestContext;

    await answerGeneration(
      ctx,
      generation,
      { stream: true, promptTokens: 9, streamStallTimeoutMs: undefined },
      {
        collect: () => Promise.reject(new Error("not collected")),
        usageOf: () => ({}),
        // The client leaves after the first delta: the stream stops reading there.
        async stream(_sse, events) {
          const it = events[Symbol.asyncIterator]();
          await it.next();
          await it.next();
          await it.return?.();
          return { outcome: "client_gone", promptTokens: 9, completionTokens: undefined };
        },
      },
    );

    expect(settled).toEqual([{ promptTokens: 9, completionTokens: 64 }]);
    expect(countTokens).not.toHaveBeenCalled();
    expect(checkpoints[0]).toEqual({ promptTokens: 9, completionTokens: 0 });
  });
});
