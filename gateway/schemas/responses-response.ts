import { z } from "zod";

/**
 * What POST /v1/responses answers, declared once: the `response` object and the events of a
 * stream, in OpenAI's shapes (openai SDK 6.49, resources/responses/responses.d.ts). The mappers
 * build these types; the tests parse what the server sent with the same schemas.
 */

export const ResponsesUsageSchema = z.object({
  input_tokens: z.number().int().nonnegative(),
  input_tokens_details: z.object({ cached_tokens: z.number().int().nonnegative() }),
  output_tokens: z.number().int().nonnegative(),
  output_tokens_details: z.object({ reasoning_tokens: z.number().int().nonnegative() }),
  total_tokens: z.number().int().nonnegative(),
});
export type ResponsesUsage = z.infer<typeof ResponsesUsageSchema>;

const ItemStatusSchema = z.enum(["in_progress", "completed", "incomplete"]);

export const OutputTextPartSchema = z.object({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(z.never()),
});
export type OutputTextPart = z.infer<typeof OutputTextPartSchema>;

export const SummaryTextPartSchema = z.object({ type: z.literal("summary_text"), text: z.string() });
export type SummaryTextPart = z.infer<typeof SummaryTextPartSchema>;

export const ReasoningItemSchema = z.object({
  type: z.literal("reasoning"),
  id: z.string().startsWith("rs_"),
  /** The thinking text, whole, as one summary part (what clients show). */
  summary: z.array(SummaryTextPartSchema),
  status: ItemStatusSchema,
});
export type ReasoningItem = z.infer<typeof ReasoningItemSchema>;

export const MessageItemSchema = z.object({
  type: z.literal("message"),
  id: z.string().startsWith("msg_"),
  role: z.literal("assistant"),
  status: ItemStatusSchema,
  content: z.array(OutputTextPartSchema),
});
export type MessageItem = z.infer<typeof MessageItemSchema>;

export const FunctionCallItemSchema = z.object({
  type: z.literal("function_call"),
  id: z.string().startsWith("fc_"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: ItemStatusSchema,
});
export type FunctionCallItem = z.infer<typeof FunctionCallItemSchema>;

export const OutputItemSchema = z.discriminatedUnion("type", [ReasoningItemSchema, MessageItemSchema, FunctionCallItemSchema]);
export type OutputItem = z.infer<typeof OutputItemSchema>;

export const ResponseStatusSchema = z.enum(["in_progress", "completed", "incomplete", "failed"]);
export type ResponseStatus = z.infer<typeof ResponseStatusSchema>;

/** The tool choice as the request gave it (`auto` when it gave none). */
const ToolChoiceEchoSchema = z.union([z.enum(["auto", "none", "required"]), z.object({ type: z.literal("function"), name: z.string() })]);

export const ResponseObjectSchema = z.object({
  id: z.string().startsWith("resp_"),
  object: z.literal("response"),
  created_at: z.number().int(),
  status: ResponseStatusSchema,
  /** Set when the response failed: OpenAI's {code, message}. */
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  incomplete_details: z.object({ reason: z.literal("max_output_tokens") }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.number().int().nullable(),
  model: z.string(),
  output: z.array(OutputItemSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.null(),
  reasoning: z.object({ effort: z.string().nullable(), summary: z.null() }),
  store: z.literal(false),
  background: z.literal(false),
  temperature: z.null(),
  top_p: z.null(),
  text: z.object({ format: z.record(z.string(), z.unknown()) }),
  tool_choice: ToolChoiceEchoSchema,
  tools: z.array(z.record(z.string(), z.unknown())),
  truncation: z.literal("disabled"),
  metadata: z.record(z.string(), z.unknown()),
  /** Absent until the response is done (the `created` and `in_progress` events). */
  usage: ResponsesUsageSchema.nullable(),
});
export type ResponseObject = z.infer<typeof ResponseObjectSchema>;

// --- stream events ------------------------------------------------------------------------------

const seq = { sequence_number: z.number().int().nonnegative() };
const at = { item_id: z.string(), output_index: z.number().int().nonnegative() };
const inPart = { ...at, content_index: z.number().int().nonnegative() };
const inSummary = { ...at, summary_index: z.number().int().nonnegative() };
/** Tessera reports no per-token log-probabilities on this endpoint: always empty. */
const noLogprobs = { logprobs: z.array(z.never()) };

const lifecycle = <T extends string>(type: T) => z.object({ type: z.literal(type), ...seq, response: ResponseObjectSchema });

export const ResponseStreamEventSchema = z.discriminatedUnion("type", [
  lifecycle("response.created"),
  lifecycle("response.in_progress"),
  lifecycle("response.completed"),
  lifecycle("response.incomplete"),
  lifecycle("response.failed"),
  z.object({ type: z.literal("response.output_item.added"), ...seq, output_index: z.number().int(), item: OutputItemSchema }),
  z.object({ type: z.literal("response.output_item.done"), ...seq, output_index: z.number().int(), item: OutputItemSchema }),
  z.object({ type: z.literal("response.content_part.added"), ...seq, ...inPart, part: OutputTextPartSchema }),
  z.object({ type: z.literal("response.content_part.done"), ...seq, ...inPart, part: OutputTextPartSchema }),
  z.object({ type: z.literal("response.output_text.delta"), ...seq, ...inPart, delta: z.string(), ...noLogprobs }),
  z.object({ type: z.literal("response.output_text.done"), ...seq, ...inPart, text: z.string(), ...noLogprobs }),
  z.object({ type: z.literal("response.reasoning_summary_part.added"), ...seq, ...inSummary, part: SummaryTextPartSchema }),
  z.object({ type: z.literal("response.reasoning_summary_part.done"), ...seq, ...inSummary, part: SummaryTextPartSchema }),
  z.object({ type: z.literal("response.reasoning_summary_text.delta"), ...seq, ...inSummary, delta: z.string() }),
  z.object({ type: z.literal("response.reasoning_summary_text.done"), ...seq, ...inSummary, text: z.string() }),
  z.object({ type: z.literal("response.function_call_arguments.delta"), ...seq, ...at, delta: z.string() }),
  z.object({ type: z.literal("response.function_call_arguments.done"), ...seq, ...at, name: z.string(), arguments: z.string() }),
  z.object({
    type: z.literal("error"),
    ...seq,
    code: z.string().nullable(),
    message: z.string(),
    param: z.string().nullable(),
    /** The same error nested, as chat streams send it: the openai SDK throws it to its caller. */
    error: z.object({ type: z.string(), code: z.string().nullable(), message: z.string(), param: z.string().nullable() }),
  }),
]);
export type ResponseStreamEvent = z.infer<typeof ResponseStreamEventSchema>;
