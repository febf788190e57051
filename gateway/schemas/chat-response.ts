import { z } from "zod";

/**
 * What POST /v1/chat/completions answers, declared once: the chat.completion object and the
 * chat.completion.chunk events of a stream. The mappers build these types; the tests parse
 * what the server sent with the same schemas.
 */

/**
 * The `denoising` object of a chunk sent with `stream_options.include_denoising`: one per
 * denoising forward of the current block (README, "Live denoising").
 */
export const DenoisingStepSchema = z.object({
  /** Generation block, from 0. */
  block: z.number().int(),
  /** Forward within the block, from 1. */
  step: z.number().int(),
  block_size: z.number().int(),
  /** Positions before it hold the prompt's tail, never masked. */
  reply_start: z.number().int(),
  /** Positions committed since the previous step; `forced`: by the grammar, without a forward (jump-forward). */
  committed: z.array(z.object({ position: z.number().int(), token_id: z.number().int(), text: z.string(), forced: z.boolean() })),
  /** Positions still masked after this forward (on a canvas: renoised by this step). */
  masked: z.number().int(),
  /**
   * A canvas model's step (README, "Live denoising"): every position's draft token and whether
   * the sampler accepted it (else it was renoised); `committed` is empty then.
   */
  canvas: z.array(z.object({ token_id: z.number().int(), text: z.string(), accepted: z.boolean() })).optional(),
  /** On a canvas's last step: its draft is the canvas the reply takes. */
  canvas_final: z.boolean().optional(),
});
export type DenoisingStep = z.infer<typeof DenoisingStepSchema>;

export const FinishReasonSchema = z.enum(["stop", "length", "tool_calls"]);
export type FinishReasonName = z.infer<typeof FinishReasonSchema>;

export const UsageSchema = z.object({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
});
export type CompletionUsage = z.infer<typeof UsageSchema>;

export const TopLogprobSchema = z.object({
  token: z.string(),
  /** Natural log of the token's probability at the step that committed the position; ≤ 0. */
  logprob: z.number().max(0),
  /** The token's UTF-8 bytes. */
  bytes: z.array(z.number().int().min(0).max(255)),
});
export type TopLogprob = z.infer<typeof TopLogprobSchema>;

export const TokenLogprobSchema = TopLogprobSchema.extend({ top_logprobs: z.array(TopLogprobSchema).max(20) });
export type TokenLogprob = z.infer<typeof TokenLogprobSchema>;

/** `choices[].logprobs`: null unless asked for. */
export const ChoiceLogprobsSchema = z.object({ content: z.array(TokenLogprobSchema).nullable(), refusal: z.null() }).nullable();
export type ChoiceLogprobs = z.infer<typeof ChoiceLogprobsSchema>;

export const CompletionToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type CompletionToolCall = z.infer<typeof CompletionToolCallSchema>;

export const ChatCompletionSchema = z.object({
  id: z.string().startsWith("chatcmpl-"),
  object: z.literal("chat.completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.number().int(),
      message: z.object({
        role: z.literal("assistant"),
        content: z.string().nullable(),
        reasoning: z.string().optional(),
        tool_calls: z.array(CompletionToolCallSchema).optional(),
      }),
      finish_reason: FinishReasonSchema,
      logprobs: ChoiceLogprobsSchema,
    }),
  ),
  usage: UsageSchema,
});
export type ChatCompletion = z.infer<typeof ChatCompletionSchema>;

export const ChunkToolCallSchema = z.object({
  index: z.number().int(),
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string() }),
});
export type ChunkToolCall = z.infer<typeof ChunkToolCallSchema>;

export const ChunkDeltaSchema = z.object({
  role: z.literal("assistant").optional(),
  content: z.string().optional(),
  reasoning: z.string().optional(),
  tool_calls: z.array(ChunkToolCallSchema).optional(),
});
export type ChunkDelta = z.infer<typeof ChunkDeltaSchema>;

export const ChatCompletionChunkSchema = z.object({
  id: z.string().startsWith("chatcmpl-"),
  object: z.literal("chat.completion.chunk"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.number().int(),
      delta: ChunkDeltaSchema,
      finish_reason: FinishReasonSchema.nullable(),
      logprobs: ChoiceLogprobsSchema,
    }),
  ),
  usage: UsageSchema.optional(),
  /** Only with `stream_options.include_denoising`, on a chunk of its own (`choices: []`): README, "Live denoising". */
  denoising: DenoisingStepSchema.optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunkSchema>;
