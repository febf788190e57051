/** What the chat form holds, as the request body is built from it. */
export interface ChatSettings {
  model: string;
  system: string;
  /** Empty: the server's default. */
  maxTokens: string;
  thinking: boolean;
  jsonMode: "off" | "json_object" | "json_schema";
  /** JSON Schema text for json_schema; empty: plain json_object. */
  schema: string;
  tools: ToolDraft[];
  toolChoice: "auto" | "none" | "required";
}

export interface ToolDraft {
  name: string;
  description: string;
  /** JSON Schema of the arguments, as text. */
  parameters: string;
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; content: string; tool_call_id: string };

/** A setting that cannot be sent as it is (bad JSON, a tool without a name), named for the person. */
export class SettingsError extends Error {
  override name = "SettingsError";
}

function parseJsonObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SettingsError(`${what} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new SettingsError(`${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * The streamed request of the chat tab: the conversation after the system prompt, and asking
 * for usage and the live denoising steps (`stream_options.include_denoising`).
 */
export function chatRequestBody(settings: ChatSettings, history: readonly ChatMessage[]): Record<string, unknown> {
  const messages: unknown[] = [];
  if (settings.system.trim() !== "") messages.push({ role: "system", content: settings.system });
  messages.push(...history);
  const body: Record<string, unknown> = {
    model: settings.model,
    messages,
    stream: true,
    stream_options: { include_usage: true, include_denoising: true },
  };
  if (settings.maxTokens.trim() !== "") {
    const n = Number(settings.maxTokens);
    if (!Number.isInteger(n) || n < 1) throw new SettingsError("max tokens must be a whole number of at least 1");
    body["max_tokens"] = n;
  }
  if (settings.thinking) body["chat_template_kwargs"] = { enable_thinking: true };
  if (settings.jsonMode === "json_object") body["response_format"] = { type: "json_object" };
  if (settings.jsonMode === "json_schema") {
    if (settings.schema.trim() === "") body["response_format"] = { type: "json_object" };
    else {
      const schema = parseJsonObject(settings.schema, "The JSON schema");
      body["response_format"] = { type: "json_schema", json_schema: { name: "reply", schema } };
    }
  }
  const tools = settings.tools.filter((t) => t.name.trim() !== "" || t.parameters.trim() !== "");
  if (tools.length > 0) {
    body["tools"] = tools.map((tool, i) => {
      const name = tool.name.trim();
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw new SettingsError(`tool ${i + 1}: the name must be 1-64 letters, digits, _ or -`);
      const parameters =
        tool.parameters.trim() === ""
          ? { type: "object", properties: {} }
          : parseJsonObject(tool.parameters, `The schema of tool "${name}"`);
      return {
        type: "function",
        function: { name, ...(tool.description.trim() !== "" ? { description: tool.description.trim() } : {}), parameters },
      };
    });
    body["tool_choice"] = settings.toolChoice;
  }
  return body;
}

/** The tool calls of the conversation's last assistant turn that no tool message answers yet. */
export function unansweredToolCalls(history: readonly ChatMessage[]): ToolCall[] {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i]!;
    if (message.role !== "assistant") continue;
    const answered = new Set(history.slice(i + 1).flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])));
    return (message.tool_calls ?? []).filter((call) => !answered.has(call.id));
  }
  return [];
}
