import { z } from "zod";
import { MAX_MESSAGE_CHARS, ModelIdSchema, StopSchema, ignoredFields, onlyOne, positiveInteger } from "./chat-request.js";
import { refuse } from "./request-errors.js";

/**
 * POST /v1/completions (OpenAI's legacy completions): the request, declared once. The prompt
 * is one text, continued as it is (no chat template). What a block-diffusion server cannot do
 * here is refused with a 400 naming the field: several prompts, token-id prompts, `suffix`,
 * `n` or `best_of` above 1. Fields the schema does not know are dropped.
 */

/** OpenAI's default `max_tokens` of a completion. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;
/** OpenAI's most alternatives per token of a completion (`logprobs`). */
export const MAX_COMPLETION_LOGPROBS = 5;
/** Characters of the prompt: the bound of one chat message, for the same reason (tokenizing costs CPU). */
export const MAX_PROMPT_CHARS = MAX_MESSAGE_CHARS;

/** Accepted whatever its value, without effect (OpenAI's sampling fields, and vLLM's that clients send). */
export const IGNORED_COMPLETION_FIELDS = [
  "temperature",
  "top_p",
  "seed",
  "user",
  "presence_penalty",
  "frequency_penalty",
  "logit_bias",
  "top_k",
  "min_p",
  "repetition_penalty",
] as const;

/**
 * `prompt`: a string, or an array holding exactly one string (what the SDK's types allow
 * besides it: several prompts, token ids, arrays of token ids, are refused).
 */
const PromptSchema = z
  .union([z.string(), z.array(z.unknown())], { error: "a string or an array of one string" })
  .superRefine((prompt, ctx) => {
    const text = typeof prompt === "string" ? prompt : prompt[0];
    if (Array.isArray(prompt)) {
      if (prompt.length === 0) {
        refuse(ctx, "Invalid 'prompt': empty array. Expected a string or an array of one string.", "empty_array");
        return;
      }
      if (prompt.some((item) => typeof item !== "string")) {
        refuse(ctx, "Invalid 'prompt': token-id prompts are not supported; send the prompt as text (a string).", "invalid_value");
        return;
      }
      if (prompt.length > 1) {
        refuse(
          ctx,
          `Invalid 'prompt': only one prompt per request is supported, but got an array of ${prompt.length} prompts.`,
          "invalid_value",
        );
        return;
      }
    }
    if (text === "") {
      refuse(ctx, "Invalid 'prompt': must not be empty.", "invalid_value");
    } else if (typeof text === "string" && text.length > MAX_PROMPT_CHARS) {
      refuse(
        ctx,
        `Invalid 'prompt': string too long. Expected at most ${MAX_PROMPT_CHARS} characters, but got ${text.length} instead.`,
        "string_above_max_length",
      );
    }
  })
  .transform((prompt) => (typeof prompt === "string" ? prompt : (prompt[0] as string)));

export const CompletionRequestSchema = z.object({
  model: ModelIdSchema,
  prompt: PromptSchema,
  suffix: z
    .string()
    .superRefine((suffix, ctx) => {
      if (suffix !== "") {
        refuse(ctx, "Invalid 'suffix': insertion (text before a suffix) is not supported; send the prompt alone.", "invalid_value");
      }
    })
    .nullish(),
  max_tokens: positiveInteger.nullish(),
  stop: StopSchema.nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  logprobs: z
    .number({ error: "an integer" })
    .superRefine((k, ctx) => {
      if (!Number.isInteger(k) || k < 0 || k > MAX_COMPLETION_LOGPROBS) {
        refuse(ctx, `Invalid 'logprobs': expected an integer from 0 to ${MAX_COMPLETION_LOGPROBS}, but got ${k}.`, "invalid_value");
      }
    })
    .nullish(),
  echo: z.boolean().nullish(),
  n: onlyOne("n", "choice"),
  best_of: onlyOne("best_of", "candidate"),
  ...ignoredFields(IGNORED_COMPLETION_FIELDS),
});

export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;
