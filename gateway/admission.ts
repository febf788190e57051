import type { MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError, type Client } from "@connectrpc/connect";
import { QuotaExceededSchema, UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { type DecideRequest, DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import {
  type CountTokensRequestSchema,
  type GenerateRequest,
  InferenceService,
  type ScoreRequest,
} from "../gen/tessera/inference/v1/inference_pb.js";
import { resolveMaxTokens } from "../lib/text-limits.js";

/**
 * What a call holds of its key's quota before it runs, the same for every transport (the JSON
 * routes and the Connect, gRPC and gRPC-Web calls of the public port): a hold that the call's
 * usage can never pass, so parallel calls cannot overdraw a quota.
 */

/** Reserves `tokens` of the call's quota of `kind` (the gate's admit), refused 429 / resource_exhausted. */
export type Admit = (kind: UsageKind, tokens: number) => Promise<unknown>;

/** A prompt as CountTokens takes it: the chat-templated messages, tools and options, or a raw prompt. */
export type PromptToCount = MessageInitShape<typeof CountTokensRequestSchema>;

/** A generation's prompt, as Generate will take it. */
export function promptOf(request: GenerateRequest): PromptToCount {
  if (request.rawPrompt !== undefined) return { model: request.model, rawPrompt: request.rawPrompt };
  const { model, messages, tools, options } = request;
  return { model, messages, tools, ...(options !== undefined ? { options } : {}) };
}

/**
 * Admits a generation for its prompt's tokens plus its max_tokens as the engine resolves it
 * before the context (lib/text-limits.ts resolveMaxTokens: unset or 0 is the default, then the
 * cap); returns the prompt's tokens.
 */
export async function admitGenerationHold(
  admit: Admit,
  inference: Pick<Client<typeof InferenceService>, "countTokens">,
  prompt: PromptToCount,
  requestedMaxTokens: number | undefined,
  signal: AbortSignal,
): Promise<number> {
  const counted = await inference.countTokens(prompt, { signal });
  await admit(UsageKind.TEXT, counted.tokens + resolveMaxTokens(requestedMaxTokens));
  return counted.tokens;
}

/** Template text a question adds to what the model reads, at most (the bundled templates add about 120 bytes). */
const TEMPLATE_BYTES_PER_QUESTION = 512;

/**
 * An upper bound of a decision's input tokens, known before anything is rendered: a token is
 * at least one byte, the body's bytes hold every text the model reads (counted twice, as a
 * state object may be rendered with indentation), plus the templates' text per question; and
 * no more than the inference workers' work cap allows.
 */
export function decisionHold(bodyBytes: number, questions: number, maxWork?: number): number {
  const byBytes = 2 * bodyBytes + TEMPLATE_BYTES_PER_QUESTION * (questions + 1);
  return maxWork === undefined ? byBytes : Math.min(byBytes, maxWork + 64);
}

/**
 * Admits a decision (or a Score) holding `bound`, the upper bound of its input tokens; when
 * that does not fit what is left, it is tokenized without running the model (`countExact`:
 * Decide or Score with count_only) and its exact cost held, so a key with Q tokens left can run
 * any decision that costs at most Q.
 */
export async function admitDecisionHold(admit: Admit, bound: number, countExact: () => Promise<number>): Promise<void> {
  try {
    await admit(UsageKind.DECISION, bound);
  } catch (err) {
    if (!(err instanceof ConnectError) || err.findDetails(QuotaExceededSchema).length === 0) throw err;
    await admit(UsageKind.DECISION, await countExact());
  }
}

/** The request's questions, whichever of its two fields carries them (the gateway sends `question_list`). */
export function questionCount(request: Pick<DecideRequest, "questionList" | "questions">): number {
  return request.questionList.length + Object.keys(request.questions).length;
}

export interface ConnectHoldDeps {
  inferenceFor: (servingId: string) => Pick<Client<typeof InferenceService>, "countTokens" | "score">;
  decision: Pick<Client<typeof DecisionService>, "decide">;
  maxDecisionWorkTokens?: number;
}

/** Sizes a call's hold from its request message; `bytes` is the size of the request as sent. */
export type HoldSizer = (admit: Admit, message: unknown, bytes: number, signal: AbortSignal) => Promise<void>;

/** The holds of the public port's Connect methods that draw on a quota, by `Service/Method`. */
export function connectHolds({ inferenceFor, decision, maxDecisionWorkTokens }: ConnectHoldDeps): Map<string, HoldSizer> {
  return new Map<string, HoldSizer>([
    [
      `${InferenceService.typeName}/${InferenceService.method.generate.name}`,
      async (admit, message, _bytes, signal) => {
        const request = message as GenerateRequest;
        await admitGenerationHold(admit, inferenceFor(request.model), promptOf(request), request.options?.maxTokens, signal);
      },
    ],
    [
      `${InferenceService.typeName}/${InferenceService.method.score.name}`,
      async (admit, message, bytes, signal) => {
        const request = message as ScoreRequest;
        await admitDecisionHold(admit, decisionHold(bytes, request.suffixes.length, maxDecisionWorkTokens), async () => {
          const counted = await inferenceFor(request.model).score({ ...request, countOnly: true }, { signal });
          return counted.inputTokens;
        });
      },
    ],
    [
      `${DecisionService.typeName}/${DecisionService.method.decide.name}`,
      async (admit, message, bytes, signal) => {
        const request = message as DecideRequest;
        await admitDecisionHold(admit, decisionHold(bytes, questionCount(request), maxDecisionWorkTokens), async () => {
          const counted = await decision.decide({ ...request, countOnly: true }, { signal });
          return Number(counted.usage?.inputTokens ?? 0);
        });
      },
    ],
  ]);
}
