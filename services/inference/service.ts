import { CLIENT_HEADER } from "../../lib/client-header.js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type CountTokensRequest,
  FinishReason,
  GenerateDeltaSchema,
  type GenerateRequest,
  type GenerateResponse,
  GenerateResponseSchema,
  type GetModelInfoRequest,
  type InferenceService,
  type ScoreRequest,
  ToolCallDeltaSchema,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import { withConnectErrors } from "./connect-errors.js";
import type { ModelEngine, ReplyChunk, ReplyEvent } from "./core/model-engine.js";
import { InvalidRequest, ModelNotServed } from "./core/engine-errors.js";
import type { ModelPool } from "./engine/model-pool.js";

export interface InferenceDeps {
  pool: ModelPool;
  /** This worker's id, reported in GenerateStarted. */
  workerId: string;
}

const FINISH_REASONS = {
  stop: FinishReason.STOP,
  length: FinishReason.LENGTH,
  tool_calls: FinishReason.TOOL_CALLS,
} as const;

/**
 * The inference service: each RPC is one call of the model's engine (core/model-engine.ts), its
 * request and reply mapped to and from the proto; the engine's errors become Connect errors at
 * this edge (connect-errors.ts).
 */
export function createInferenceService(deps: InferenceDeps): ServiceImpl<typeof InferenceService> {
  return withConnectErrors(engineService(deps));
}

function engineService({ pool, workerId }: InferenceDeps): ServiceImpl<typeof InferenceService> {
  function engineFor(model: string): ModelEngine {
    if (model === "") throw new InvalidRequest("model is required");
    const engine = pool.engine(model);
    if (engine === undefined) throw new ModelNotServed(`model "${model}" is not served by this worker`);
    return engine;
  }

  return {
    async *generate(req: GenerateRequest, ctx: HandlerContext): AsyncGenerator<GenerateResponse> {
      for await (const event of engineFor(req.model).generate(req, ctx.signal)) {
        yield create(GenerateResponseSchema, { event: responseEvent(req.model, workerId, event) });
      }
    },

    async score(req: ScoreRequest, ctx: HandlerContext) {
      const suffixes = req.suffixes.map((s) => ({ text: s.text, labels: s.labels }));
      const out = await engineFor(req.model).score(
        {
          model: req.model,
          prefix: req.prefix,
          suffixes,
          countOnly: req.countOnly,
          client: ctx.requestHeader.get(CLIENT_HEADER) ?? undefined,
        },
        ctx.signal,
      );
      return {
        results: out.results.map((r) => ({ logits: r.logits, suffixTokens: r.suffixTokens })),
        prefixTokens: out.prefixTokens,
        inputTokens: out.inputTokens,
      };
    },

    async countTokens(req: CountTokensRequest) {
      return { tokens: await engineFor(req.model).countTokens(req) };
    },

    getModelInfo(req: GetModelInfoRequest) {
      const { maxPositions, blockSize, capabilities, decision, slots } = engineFor(req.model).info();
      return {
        model: req.model,
        maxPositions,
        blockSize,
        supportsImages: capabilities.images,
        supportsTools: capabilities.tools,
        supportsThinking: capabilities.thinking,
        ...(decision !== undefined ? { decision } : {}),
        slotsTotal: slots.total,
        slotsFree: slots.free,
      };
    },
  };
}

/** An engine event as the stream's GenerateResponse event. */
function responseEvent(model: string, workerId: string, event: ReplyEvent): MessageInitShape<typeof GenerateResponseSchema>["event"] {
  switch (event.type) {
    case "started":
      return { case: "started", value: { model, promptTokens: event.promptTokens, workerId, tokenizedPrompt: event.tokenizedPrompt } };
    case "step":
      return { case: "step", value: event.step };
    case "chunk":
      return { case: "delta", value: deltaOf(event.chunk) };
    case "finished": {
      const { promptTokens, completionTokens } = event;
      return {
        case: "finished",
        value: {
          finishReason: FINISH_REASONS[event.reason],
          usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens },
          forwardPasses: event.forwardPasses,
        },
      };
    }
  }
}

function deltaOf(chunk: ReplyChunk) {
  return create(GenerateDeltaSchema, {
    content: chunk.content,
    reasoning: chunk.reasoning,
    blockIndex: chunk.blockIndex,
    completionTokens: chunk.completionTokens,
    logprobs: chunk.logprobs,
    toolCalls: chunk.toolCalls.map((c) =>
      create(ToolCallDeltaSchema, { index: c.index, id: c.id ?? "", name: c.name ?? "", arguments: c.arguments }),
    ),
  });
}
