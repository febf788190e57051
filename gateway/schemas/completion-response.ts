import { z } from "zod";
import { UsageSchema } from "./chat-response.js";

/**
 * What POST /v1/completions answers, declared once: the text_completion object, and the
 * text_completion chunks of a stream (same object, text deltas). The mappers build these types;
 * the tests parse what the server sent with the same schemas.
 */

export const CompletionFinishReasonSchema = z.enum(["stop", "length"]);
export type CompletionFinishReason = z.infer<typeof CompletionFinishReasonSchema>;

/**
 * OpenAI's legacy logprobs, one entry per token in each list. Prompt tokens (with `echo`) are
 * not scored: their `token_logprobs` and `top_logprobs` are null.
 */
export const CompletionLogprobsSchema = z.object({
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number().max(0).nullable()),
  /** Per token: the `logprobs` most probable tokens at its step and the token itself, text → logprob. */
  top_logprobs: z.array(z.record(z.string(), z.number().max(0)).nullable()),
  /** Where each token starts in `text`, in code points; a character split across tokens counts at its first (text-offsets.ts). */
  text_offset: z.array(z.number().int().nonnegative()),
});
export type CompletionLogprobs = z.infer<typeof CompletionLogprobsSchema>;

const choice = <F extends z.ZodType>(finishReason: F) =>
  z.object({
    text: z.string(),
    index: z.number().int(),
    logprobs: CompletionLogprobsSchema.nullable(),
    finish_reason: finishReason,
  });

export const TextCompletionSchema = z.object({
  id: z.string().startsWith("cmpl-"),
  object: z.literal("text_completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(choice(CompletionFinishReasonSchema)),
  usage: UsageSchema,
});
export type TextCompletion = z.infer<typeof TextCompletionSchema>;

export const TextCompletionChunkSchema = z.object({
  id: z.string().startsWith("cmpl-"),
  object: z.literal("text_completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(choice(CompletionFinishReasonSchema.nullable())),
  usage: UsageSchema.optional(),
});
export type TextCompletionChunk = z.infer<typeof TextCompletionChunkSchema>;
