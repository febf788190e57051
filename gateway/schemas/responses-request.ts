import { z } from "zod";
import {
  FunctionDefinitionSchema,
  JsonObjectSchema,
  MAX_MESSAGE_CHARS,
  MAX_MESSAGES,
  ModelIdSchema,
  checkListLength,
  checkTextChars,
  checkToolChoice,
  checkTools,
  ignoredFields,
  positiveInteger,
  refuseEmptyArray,
} from "./chat-request.js";
import { refuse } from "./request-errors.js";

/**
 * POST /v1/responses: the request, declared once (the stateless part of OpenAI's Responses
 * API). Input items are messages, function calls and their outputs, and reasoning items sent
 * back; what needs state kept on the server (`store: true`, `previous_response_id`,
 * `background`, `conversation`, stored `prompt`s, `item_reference` items) is refused with a
 * 400 naming the field. The ignored fields are declared as such (IGNORED_RESPONSES_FIELDS).
 */

/** Accepted whatever its value, without effect (what the openai SDK and the AI SDK send). */
export const IGNORED_RESPONSES_FIELDS = [
  "temperature",
  "top_p",
  "top_logprobs",
  "parallel_tool_calls",
  "max_tool_calls",
  "user",
  "truncation",
  "include",
  "service_tier",
  "stream_options",
  "prompt_cache_key",
  "prompt_cache_retention",
  "prompt_cache_options",
  "safety_identifier",
  "context_management",
] as const;

const STATELESS = "this server keeps no responses (it is stateless)";

/** A field that needs server-side state: refused (400 naming it) unless absent, null or `harmless`. */
const stateful = <T extends z.ZodType>(schema: T, harmless: (value: z.infer<T>) => boolean, code: string, why: string) =>
  schema.nullish().superRefine((value, ctx) => {
    if (value !== undefined && value !== null && !harmless(value as z.infer<T>)) refuse(ctx, `Invalid '{param}': ${why}`, code);
  });

// --- input items --------------------------------------------------------------------------------

const InputTextSchema = z.object({ type: z.literal("input_text"), text: z.string() });
const OutputTextSchema = z.object({ type: z.literal("output_text"), text: z.string() });
const RefusalSchema = z.object({ type: z.literal("refusal"), refusal: z.string() });

const MessageContentSchema = z.union(
  [z.string(), z.array(z.discriminatedUnion("type", [InputTextSchema, OutputTextSchema, RefusalSchema]))],
  { error: "a string or an array of content parts" },
);

const MessageItemSchema = z.object({
  type: z.literal("message"),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: MessageContentSchema,
});

const FunctionCallItemSchema = z.object({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
});

const FunctionCallOutputItemSchema = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.discriminatedUnion("type", [InputTextSchema]))], {
    error: "a string or an array of input_text parts",
  }),
});

const ReasoningItemSchema = z.object({
  type: z.literal("reasoning"),
  summary: z.array(z.object({ type: z.literal("summary_text"), text: z.string() })).nullish(),
  content: z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() })).nullish(),
});

const ItemReferenceSchema = z
  .object({ type: z.literal("item_reference"), id: z.string().nullish() })
  .superRefine((_item, ctx) =>
    refuse(
      ctx,
      `Invalid '{param}': an item_reference points at a stored item, and ${STATELESS}; send the item itself (with the AI SDK: providerOptions.openai.store = false).`,
      "unsupported_parameter",
    ),
  );

/** An item without `type` but with a `role` is a message (OpenAI's "easy input message"). */
const InputItemSchema = z.preprocess(
  (item) => (typeof item === "object" && item !== null && !("type" in item) && "role" in item ? { ...item, type: "message" } : item),
  z.discriminatedUnion("type", [
    MessageItemSchema,
    FunctionCallItemSchema,
    FunctionCallOutputItemSchema,
    ReasoningItemSchema,
    ItemReferenceSchema,
  ]),
);
export type ResponsesInputItem = z.infer<typeof InputItemSchema>;

/** The texts of a message's content, one per part (a string is one part). */
export function messageTexts(content: z.infer<typeof MessageContentSchema>): string[] {
  if (typeof content === "string") return [content];
  return content.map((part) => (part.type === "refusal" ? part.refusal : part.text));
}

/** The texts of a function call's output, one per part. */
export function outputTexts(output: z.infer<typeof FunctionCallOutputItemSchema>["output"]): string[] {
  return typeof output === "string" ? [output] : output.map((part) => part.text);
}

const sumLengths = (texts: string[]): number => texts.reduce((n, text) => n + text.length, 0);

/** The thinking text of a reasoning item sent back: its content when present, else its summary. */
export function reasoningText(item: z.infer<typeof ReasoningItemSchema>): string {
  const parts = item.content?.length ? item.content : (item.summary ?? []);
  return parts.map((part) => part.text).join("\n\n");
}

function itemChars(item: ResponsesInputItem): number {
  switch (item.type) {
    case "message":
      return sumLengths(messageTexts(item.content));
    case "function_call":
      return item.name.length + item.arguments.length;
    case "function_call_output":
      return sumLengths(outputTexts(item.output));
    case "reasoning":
      return reasoningText(item).length;
    default:
      return 0;
  }
}

const InputItemsSchema = z.array(InputItemSchema).superRefine((items, ctx) => {
  if (!checkListLength(items, MAX_MESSAGES, ctx, "input")) return;
  const callIds = new Set<string>();
  items.forEach((item, i) => {
    const at = `input[${i}]`;
    if (item.type === "function_call") {
      if (item.call_id === "") refuse(ctx, `Invalid '${at}.call_id': must not be empty.`, "invalid_value", [i, "call_id"]);
      callIds.add(item.call_id);
    }
    if (item.type === "function_call_output" && !callIds.has(item.call_id)) {
      refuse(ctx, `Invalid '${at}.call_id': '${item.call_id}' answers no function_call item before it.`, "invalid_value", [i, "call_id"]);
    }
    if (item.type === "message" && Array.isArray(item.content) && item.content.length === 0) {
      refuseEmptyArray(ctx, `${at}.content`, [i, "content"]);
    }
    checkTextChars(itemChars(item), ctx, at, "item", [i]);
  });
});

const InputSchema = z.union([z.string(), InputItemsSchema], { error: "a string or an array of input items" }).superRefine((input, ctx) => {
  if (typeof input === "string" && input.length > MAX_MESSAGE_CHARS) {
    refuse(
      ctx,
      `Invalid 'input': string too long. Expected at most ${MAX_MESSAGE_CHARS} characters, but got ${input.length} instead.`,
      "string_above_max_length",
    );
  }
});

// --- tools, text format, reasoning --------------------------------------------------------------

/** Responses' flat function tool: {type, name, description, parameters, strict}. */
const FunctionToolSchema = FunctionDefinitionSchema.extend({ type: z.literal("function") });

const ToolsSchema = z
  .array(z.discriminatedUnion("type", [FunctionToolSchema]))
  .superRefine((tools, ctx) => checkTools(tools, ctx, (i) => ({ param: `tools[${i}]`, path: [i] })));

const ToolChoiceSchema = z.union([z.enum(["auto", "none", "required"]), z.object({ type: z.literal("function"), name: z.string() })], {
  error: "a string or an object",
});

const TextFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().nullish(),
    description: z.string().nullish(),
    schema: JsonObjectSchema,
    strict: z.boolean().nullish(),
  }),
]);
export type ResponsesTextFormat = z.infer<typeof TextFormatSchema>;

const ReasoningSchema = z.object({
  effort: z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"]).nullish(),
  ...ignoredFields(["summary", "generate_summary"]),
});

// --- the request --------------------------------------------------------------------------------

export const ResponsesRequestSchema = z
  .object({
    model: ModelIdSchema,
    input: InputSchema,
    instructions: z
      .string()
      .superRefine((text, ctx) => {
        if (text.length > MAX_MESSAGE_CHARS) {
          refuse(ctx, `Invalid 'instructions': expected at most ${MAX_MESSAGE_CHARS} characters.`, "string_above_max_length");
        }
      })
      .nullish(),
    max_output_tokens: positiveInteger.nullish(),
    text: z.object({ format: TextFormatSchema.nullish(), ...ignoredFields(["verbosity"]) }).nullish(),
    tools: ToolsSchema.nullish(),
    tool_choice: ToolChoiceSchema.nullish(),
    reasoning: ReasoningSchema.nullish(),
    stream: z.boolean().nullish(),
    /** Echoed on the response, as OpenAI does; nothing else reads it. */
    metadata: z.record(z.string(), z.unknown()).nullish(),
    store: stateful(
      z.boolean({ error: "a boolean" }),
      (store) => !store,
      "unsupported_value",
      `${STATELESS}; send 'store': false or leave it out.`,
    ),
    previous_response_id: stateful(
      z.string(),
      () => false,
      "unsupported_parameter",
      `${STATELESS}; send the earlier turns in 'input' (the previous response's output items, then your function_call_output items).`,
    ),
    background: stateful(
      z.boolean({ error: "a boolean" }),
      (background) => !background,
      "unsupported_value",
      `a background response is kept on the server to be polled, and ${STATELESS}; leave 'background' out.`,
    ),
    conversation: stateful(
      z.unknown(),
      () => false,
      "unsupported_parameter",
      `a conversation is state kept on the server, and ${STATELESS}; send the turns in 'input'.`,
    ),
    prompt: stateful(
      z.unknown(),
      () => false,
      "unsupported_parameter",
      "stored prompt templates are not served; send 'instructions' and 'input'.",
    ),
    ...ignoredFields(IGNORED_RESPONSES_FIELDS),
  })
  .superRefine((request, ctx) => checkToolChoice(request.tool_choice, request.tools ?? [], ctx));

export type ResponsesRequest = z.infer<typeof ResponsesRequestSchema>;
