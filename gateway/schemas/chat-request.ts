import { z } from "zod";
import { MAX_HTTP_STOP_SEQUENCES, MAX_TOP_LOGPROBS } from "../../lib/text-limits.js";
import { refuse } from "./request-errors.js";

/**
 * POST /v1/chat/completions: the request, declared once. Parsing it validates every field of
 * the API document's request table and what OpenAI SDK users send (naming the offending field
 * in `param`, see request-errors.ts), and gives the TypeScript type the mapper reads. The
 * fields the service ignores are declared too (IGNORED_CHAT_FIELDS), as accepting anything.
 * Fields the schema does not know are dropped, as before.
 */

/** OpenAI's own limits: 128 tools, tool names of [a-zA-Z0-9_-]{1,64} (its 4 stop sequences: lib/text-limits.ts). */
export const MAX_TOOLS = 128;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** Nesting allowed in the JSON passed through as is (schemas, tool parameters). */
export const MAX_SCHEMA_DEPTH = 64;
/**
 * Messages per request and characters per message. Far above any context served here (1 Mi
 * characters is about 250k tokens), they bound the work done on a request before the model's
 * own context check: tokenizing costs about 1 µs per character of the event loop's time.
 */
export const MAX_MESSAGES = 2048;
export const MAX_MESSAGE_CHARS = 1024 * 1024;
/** Longest `data:` URL of an image, about 3 MiB of image. */
export const MAX_IMAGE_URL_CHARS = 4 * 1024 * 1024;
/** Accepted whatever its value, without effect (the API document's list, then what OpenAI SDK users send). */
export const IGNORED_CHAT_FIELDS = [
  "temperature",
  "seed",
  "min_p",
  "logit_bias",
  "presence_penalty",
  "frequency_penalty",
  "reasoning",
  "top_p",
  "top_k",
  "repetition_penalty",
  "reasoning_effort",
  "user",
  "parallel_tool_calls",
  "metadata",
  "store",
  "service_tier",
  "prediction",
  "modalities",
  "audio",
  "verbosity",
  "web_search_options",
  "prompt_cache_key",
  "safety_identifier",
] as const;

const ignored = z.unknown().optional().meta({ ignored: true });

/** A shape of `ignored` fields by name. */
export function ignoredFields<const K extends string>(names: readonly K[]): Record<K, typeof ignored> {
  return Object.fromEntries(names.map((name) => [name, ignored])) as Record<K, typeof ignored>;
}

/** Refuses JSON nested deeper than MAX_SCHEMA_DEPTH (it is copied into protobuf Structs recursively). */
export function checkDepth(value: unknown, ctx: z.core.$RefinementCtx<unknown>, path: PropertyKey[] = []): void {
  let level: unknown[] = [value];
  for (let depth = 1; level.length > 0; depth++) {
    if (depth > MAX_SCHEMA_DEPTH) {
      refuse(ctx, `Invalid '{param}': nested deeper than ${MAX_SCHEMA_DEPTH} levels.`, "invalid_value", path);
      return;
    }
    const next: unknown[] = [];
    for (const item of level) if (typeof item === "object" && item !== null) next.push(...Object.values(item));
    level = next;
  }
}

/** A JSON object passed through as is (a JSON Schema), at most MAX_SCHEMA_DEPTH deep. */
export const JsonObjectSchema = z.record(z.string(), z.unknown()).superRefine((value, ctx) => checkDepth(value, ctx));

/** A positive integer (token counts). */
export const positiveInteger = z.number({ error: "an integer" }).superRefine((value, ctx) => {
  if (!Number.isInteger(value) || value < 1) {
    refuse(ctx, `Invalid '{param}': expected a positive integer, but got ${String(value)} instead.`, "invalid_value");
  }
});

/** The model the request names: any non-empty id (the registry says whether it exists). */
export const ModelIdSchema = z.string().superRefine((model, ctx) => {
  if (model.trim() === "") refuse(ctx, "Invalid 'model': must not be empty.", "invalid_value");
});

/** `n`, `best_of`: one is all there is. */
export const onlyOne = (param: string, what: string) =>
  z
    .number({ error: "an integer" })
    .superRefine((value, ctx) => {
      if (!Number.isInteger(value) || value < 1) refuse(ctx, `Invalid '${param}': must be a positive integer.`, "invalid_value");
      else if (value > 1) refuse(ctx, `Invalid '${param}': only one ${what} per request is supported (${param} = 1).`, "invalid_value");
    })
    .nullish();

/** Refuses an empty array at `param`. */
export function refuseEmptyArray(ctx: z.core.$RefinementCtx<unknown>, param: string, path: PropertyKey[] = []): void {
  refuse(
    ctx,
    `Invalid '${param}': empty array. Expected an array with minimum length 1, but got an empty array instead.`,
    "empty_array",
    path,
  );
}

/** Refuses a message or input item at `param` whose text is longer than MAX_MESSAGE_CHARS. */
export function checkTextChars(chars: number, ctx: z.core.$RefinementCtx<unknown>, param: string, what: string, path: PropertyKey[]): void {
  if (chars > MAX_MESSAGE_CHARS) {
    refuse(
      ctx,
      `Invalid '${param}': ${what} too long. Expected at most ${MAX_MESSAGE_CHARS} characters of text, but got ${chars} instead.`,
      "string_above_max_length",
      path,
    );
  }
}

/** Refuses an empty list at `param`, or one longer than `max`; false when it was refused. */
export function checkListLength(list: readonly unknown[], max: number, ctx: z.core.$RefinementCtx<unknown>, param: string): boolean {
  if (list.length === 0) {
    refuseEmptyArray(ctx, param);
    return false;
  }
  if (list.length > max) {
    refuse(
      ctx,
      `Invalid '${param}': array too long. Expected an array with maximum length ${max}, but got an array with length ${list.length} instead.`,
      "array_above_max_length",
    );
    return false;
  }
  return true;
}

// --- tools -------------------------------------------------------------------------------------

export const FunctionDefinitionSchema = z.object({
  name: z.string(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: ignored,
});

export const ChatToolSchema = z.object({ type: z.literal("function"), function: FunctionDefinitionSchema });

/** Tool names, their uniqueness, their count and their schemas' depth, for a list of tools at `param`. */
export function checkTools(
  tools: readonly { name: string; parameters?: Record<string, unknown> | null }[],
  ctx: z.core.$RefinementCtx<unknown>,
  at: (i: number) => { param: string; path: PropertyKey[] },
): void {
  if (tools.length > MAX_TOOLS) {
    refuse(ctx, `Invalid 'tools': at most ${MAX_TOOLS} tools are allowed, but got ${tools.length}.`, "invalid_value");
    return;
  }
  const seen = new Set<string>();
  tools.forEach((tool, i) => {
    const { param, path } = at(i);
    if (!TOOL_NAME.test(tool.name)) {
      refuse(
        ctx,
        `Invalid '${param}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.`,
        "invalid_value",
        [...path, "name"],
      );
    } else if (seen.has(tool.name)) {
      refuse(ctx, `Invalid '${param}.name': the tool name '${tool.name}' is used twice.`, "invalid_value", [...path, "name"]);
    }
    seen.add(tool.name);
    if (tool.parameters !== undefined && tool.parameters !== null) {
      checkDepth(tool.parameters, ctx, [...path, "parameters"]);
    }
  });
}

const ToolChoiceSchema = z.union(
  [z.enum(["auto", "none", "required"]), z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) })],
  { error: "a string or an object" },
);

// --- messages ----------------------------------------------------------------------------------

const TextPartSchema = z.object({ type: z.literal("text"), text: z.string() });

const ImageUrlSchema = z.preprocess(
  // Some clients send the URL itself instead of {url}.
  (value) => (typeof value === "string" ? { url: value } : value),
  z.object({
    url: z.string().superRefine((url, ctx) => {
      if (url.length > MAX_IMAGE_URL_CHARS) {
        refuse(
          ctx,
          `Invalid '{param}': the image is too large. Expected a data: URL of at most ${MAX_IMAGE_URL_CHARS} characters, but got ${url.length} instead.`,
          "string_above_max_length",
        );
      } else if (!/^data:image\/[a-z0-9.+-]+;base64,/i.test(url)) {
        refuse(
          ctx,
          "Invalid '{param}': only data: URLs of base64 images (data:image/png;base64,…) are accepted; remote URLs are never fetched.",
          "invalid_value",
        );
      }
    }),
    detail: z.enum(["auto", "low", "high"]).nullish(),
  }),
);

const ImagePartSchema = z.object({ type: z.literal("image_url"), image_url: ImageUrlSchema });

const contentOf = <P extends z.ZodType>(part: P) =>
  z.union([z.string(), z.array(part)], { error: "a string or an array of content parts" });

const TextContentSchema = contentOf(z.discriminatedUnion("type", [TextPartSchema]));
const UserContentSchema = contentOf(z.discriminatedUnion("type", [TextPartSchema, ImagePartSchema]));

export const AssistantToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").nullish(),
  function: z.object({
    name: z.string(),
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())], { error: "a string" }).nullish(),
  }),
});

const name = z.string().nullish();

const SystemMessageSchema = z.object({ role: z.literal(["system", "developer"]), content: TextContentSchema, name });
const UserMessageSchema = z.object({ role: z.literal("user"), content: UserContentSchema, name });
const AssistantMessageSchema = z.object({
  role: z.literal("assistant"),
  content: TextContentSchema.nullish(),
  name,
  tool_calls: z.array(AssistantToolCallSchema).nullish(),
  // Clients that keep the model's reasoning send it back; it is context, never required.
  reasoning: z.unknown().optional(),
  reasoning_content: z.unknown().optional(),
});
const ToolMessageSchema = z.object({ role: z.literal("tool"), content: TextContentSchema, tool_call_id: z.string(), name });

export const ChatMessageSchema = z.discriminatedUnion("role", [
  SystemMessageSchema,
  UserMessageSchema,
  AssistantMessageSchema,
  ToolMessageSchema,
]);
export type ChatMessageInput = z.infer<typeof ChatMessageSchema>;

/** Characters of a message's text: content, reasoning, name, tool-call names and arguments. */
function messageChars(message: ChatMessageInput): number {
  let chars = message.name?.length ?? 0;
  const content = message.content;
  if (typeof content === "string") chars += content.length;
  else if (content) for (const part of content) if (part.type === "text") chars += part.text.length;
  if (message.role === "assistant") {
    const reasoning = message.reasoning ?? message.reasoning_content;
    if (typeof reasoning === "string") chars += reasoning.length;
    for (const call of message.tool_calls ?? []) {
      const args = call.function.arguments;
      chars += call.function.name.length + (typeof args === "string" ? args.length : args ? JSON.stringify(args).length : 2);
    }
  }
  return chars;
}

const MessagesSchema = z.array(ChatMessageSchema).superRefine((messages, ctx) => {
  if (!checkListLength(messages, MAX_MESSAGES, ctx, "messages")) return;
  const callIds = new Set<string>();
  messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    if (message.role === "assistant") {
      const calls = message.tool_calls ?? [];
      calls.forEach((call, c) => {
        if (call.id === "")
          refuse(ctx, `Invalid '${at}.tool_calls[${c}].id': must not be empty.`, "invalid_value", [i, "tool_calls", c, "id"]);
        callIds.add(call.id);
      });
      if (calls.length === 0 && (message.content === undefined || message.content === null)) {
        refuse(ctx, `Missing required parameter: '${at}.content'.`, "missing_required_parameter", [i, "content"]);
      }
    }
    const content = message.content;
    if (Array.isArray(content) && content.length === 0 && !(message.role === "assistant" && (message.tool_calls ?? []).length > 0)) {
      refuseEmptyArray(ctx, `${at}.content`, [i, "content"]);
    }
    if (message.role === "tool" && !callIds.has(message.tool_call_id)) {
      refuse(
        ctx,
        `Invalid '${at}.tool_call_id': '${message.tool_call_id}' answers no tool call of an earlier assistant message.`,
        "invalid_value",
        [i, "tool_call_id"],
      );
    }
    checkTextChars(messageChars(message), ctx, at, "message", [i, "content"]);
  });
});

// --- the request -------------------------------------------------------------------------------

export const StopSchema = z
  .union([z.string(), z.array(z.string())], { error: "a string or an array of strings" })
  .superRefine((stop, ctx) => {
    if (typeof stop === "string") {
      if (stop === "") refuse(ctx, "Invalid 'stop': a stop sequence must not be empty.", "invalid_value");
      return;
    }
    if (stop.length > MAX_HTTP_STOP_SEQUENCES) {
      refuse(
        ctx,
        `Invalid 'stop': at most ${MAX_HTTP_STOP_SEQUENCES} stop sequences are allowed, but got ${stop.length}.`,
        "invalid_value",
      );
      return;
    }
    stop.forEach((item, i) => {
      if (item === "") refuse(ctx, `Invalid 'stop[${i}]': a stop sequence must not be empty.`, "invalid_value", [i]);
    });
  });

const ResponseFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: JsonObjectSchema,
  }),
]);

export const ChatCompletionRequestSchema = z
  .object({
    model: ModelIdSchema,
    n: onlyOne("n", "choice"),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().nullish(), include_denoising: z.boolean().nullish() }).nullish(),
    max_completion_tokens: positiveInteger.nullish(),
    max_tokens: positiveInteger.nullish(),
    stop: StopSchema.nullish(),
    response_format: ResponseFormatSchema.nullish(),
    tools: z
      .array(ChatToolSchema)
      .superRefine((tools, ctx) =>
        checkTools(
          tools.map((t) => t.function),
          ctx,
          (i) => ({ param: `tools[${i}].function`, path: [i, "function"] }),
        ),
      )
      .nullish(),
    tool_choice: ToolChoiceSchema.nullish(),
    chat_template_kwargs: z.object({ enable_thinking: z.boolean().nullish() }).nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z
      .number({ error: "an integer" })
      .superRefine((k, ctx) => {
        if (!Number.isInteger(k) || k < 0 || k > MAX_TOP_LOGPROBS) {
          refuse(ctx, `Invalid 'top_logprobs': expected an integer from 0 to ${MAX_TOP_LOGPROBS}, but got ${k}.`, "invalid_value");
        }
      })
      .nullish(),
    messages: MessagesSchema,
    ...ignoredFields(IGNORED_CHAT_FIELDS),
  })
  .superRefine((request, ctx) => {
    checkToolChoice(request.tool_choice, request.tools ?? [], ctx);
    if (request.top_logprobs !== undefined && request.top_logprobs !== null && request.logprobs !== true) {
      refuse(ctx, "Invalid 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is given.", "invalid_value", ["top_logprobs"]);
    }
  });

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/**
 * `required` needs tools; a named function must be one of them. Chat names it at
 * `tool_choice.function.name`, Responses (flat) at `tool_choice.name`.
 */
export function checkToolChoice(
  choice: "auto" | "none" | "required" | { function: { name: string } } | { name: string } | null | undefined,
  tools: readonly { function: { name: string } }[] | readonly { name: string }[],
  ctx: z.core.$RefinementCtx<unknown>,
): void {
  const names = tools.map((t) => ("function" in t ? t.function.name : t.name));
  if (choice === "required" && names.length === 0) {
    refuse(ctx, "Invalid 'tool_choice': 'required' needs at least one tool in 'tools'.", "invalid_value", ["tool_choice"]);
  } else if (typeof choice === "object" && choice !== null) {
    const [name, path] =
      "function" in choice ? [choice.function.name, ["tool_choice", "function", "name"]] : [choice.name, ["tool_choice", "name"]];
    if (!names.includes(name)) refuse(ctx, `Invalid '${path.join(".")}': no tool named '${name}' is in 'tools'.`, "invalid_value", path);
  }
}
