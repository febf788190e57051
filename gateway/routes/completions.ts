import type { Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { HttpError, toHttpError } from "../errors.js";
import { collectTextCompletion, createTextChunker, createTextCompletionMeta, parseCompletionRequest } from "../mappers/completion.js";
import { streamGeneration } from "../mappers/generation-stream.js";
import type { Route } from "../route.js";
import { createSseWriter } from "../sse.js";
import type { ChatRouteDeps } from "./chat-completions.js";
import { inClientTerms, resolveTextModel, shownAs, streamErrorBody, tokensOfText } from "./text-generation.js";

/**
 * POST /v1/completions, OpenAI's legacy completions: the prompt continued as it is (no chat
 * template, GenerateRequest.raw_prompt). The same order, gate charge and errors as chat
 * completions: validate (400 naming `param`), resolve the model (404), count the prompt's
 * tokens, admit reserving prompt + max_tokens of the text quota (429), generate (JSON or SSE),
 * settle the exact usage; a stream the client leaves is charged what was delivered.
 */
export function completionsRoute({ registry, inferenceFor, streamStallTimeoutMs }: ChatRouteDeps): Route {
  return {
    method: "POST",
    path: "/v1/completions",
    errorStyle: "openai",
    charge: { kind: UsageKind.TEXT, hold: "handler" },
    body: "json",
    async handle(ctx) {
      const parsed = parseCompletionRequest(ctx.body, { requestId: ctx.requestId });
      if (!parsed.ok) {
        const { message, param, code } = parsed.error;
        throw new HttpError(400, "invalid_request_error", message, { code: code ?? "invalid_request", param });
      }
      const { request, prompt, stream, includeUsage, echo, logprobs } = parsed;
      const asked = request.model;
      ctx.log.model = asked;
      const { servingId, shownModel } = await resolveTextModel(registry, asked, ctx.signal);
      const inference: Client<typeof InferenceService> = inferenceFor(servingId);
      request.model = servingId;

      // Counted as Generate will take it: a prompt that cannot fit the context is refused before it is tokenized.
      const counted = await inference.countTokens({ model: servingId, rawPrompt: prompt }, { signal: ctx.signal }).catch((err: unknown) => {
        throw inClientTerms(err, servingId, shownModel);
      });
      await ctx.admit(UsageKind.TEXT, counted.tokens + (request.options?.maxTokens ?? 0));

      const meta = createTextCompletionMeta({ model: shownModel, prompt, echo, logprobs });
      const delivered = { text: "" };
      if (!stream) {
        const completion = await collectTextCompletion(
          shownAs(inference.generate(request, { signal: ctx.signal }), servingId, shownModel, delivered),
          meta,
        );
        await ctx.settle(UsageKind.TEXT, {
          promptTokens: completion.usage.prompt_tokens,
          completionTokens: completion.usage.completion_tokens,
        });
        return { body: completion };
      }

      const sse = createSseWriter(ctx.res, streamStallTimeoutMs === undefined ? {} : { stallTimeoutMs: streamStallTimeoutMs });
      const signal = AbortSignal.any([ctx.signal, sse.signal]);
      const outcome = await streamGeneration(
        sse,
        shownAs(inference.generate(request, { signal }), servingId, shownModel, delivered),
        createTextChunker(meta, { includeUsage }),
        streamErrorBody,
      );
      // A stream that ended early is charged the tokens of the text that reached the client.
      const completionTokens = outcome.completionTokens ?? (await tokensOfText(inference, servingId, delivered.text));
      await ctx.settle(UsageKind.TEXT, { promptTokens: outcome.promptTokens || counted.tokens, completionTokens });
      if (outcome.outcome === "failed") ctx.log["streamError"] = toHttpError(outcome.error).message;
      return undefined;
    },
  };
}
