import { create } from "@bufbuild/protobuf";
import { type GenerateRequest, GenerateRequestSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { resolveMaxTokens } from "../../lib/text-limits.js";
import { type CompletionRequest, CompletionRequestSchema, DEFAULT_COMPLETION_MAX_TOKENS } from "../schemas/completion-request.js";
import { PARSE_OPTIONS, type RequestError, requestErrorOf } from "../schemas/request-errors.js";

export * from "./completion-response.js";

/**
 * OpenAI legacy completion request JSON → inference GenerateRequest with `raw_prompt`: the
 * prompt is continued as it is, no chat template. Validated by its schema
 * (gateway/schemas/completion-request.ts).
 */

export type ParsedCompletionRequest =
  | {
      ok: true;
      request: GenerateRequest;
      /** The prompt as the client sent it (what `echo` prepends). */
      prompt: string;
      stream: boolean;
      includeUsage: boolean;
      /** Alternatives per token (0 to 5) when logprobs were asked for. */
      logprobs: number | undefined;
      echo: boolean;
    }
  | { ok: false; error: RequestError };

export function parseCompletionRequest(body: unknown): ParsedCompletionRequest {
  const parsed = CompletionRequestSchema.safeParse(body, PARSE_OPTIONS);
  if (!parsed.success) return { ok: false, error: requestErrorOf(parsed.error) };
  const completion = parsed.data;
  const logprobs = completion.logprobs ?? undefined;
  const echo = completion.echo ?? false;
  return {
    ok: true,
    request: generateRequestOf(completion, ""),
    prompt: completion.prompt,
    stream: completion.stream ?? false,
    includeUsage: completion.stream_options?.include_usage ?? false,
    logprobs,
    echo,
  };
}

function generateRequestOf(completion: CompletionRequest, requestId: string): GenerateRequest {
  const logprobs = completion.logprobs ?? undefined;
  return create(GenerateRequestSchema, {
    requestId,
    model: completion.model,
    rawPrompt: completion.prompt,
    options: {
      maxTokens: resolveMaxTokens(completion.max_tokens, { maxTokens: DEFAULT_COMPLETION_MAX_TOKENS }),
      stop: typeof completion.stop === "string" ? [completion.stop] : (completion.stop ?? []),
      logprobs: logprobs !== undefined,
      topLogprobs: logprobs ?? 0,
      // The prompt's tokens are listed (not scored) only when echo shows them with logprobs.
      includeTokenizedPrompt: logprobs !== undefined && (completion.echo ?? false),
    },
  });
}
