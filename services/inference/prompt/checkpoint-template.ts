import type { ChatTemplateVariables } from "./chat-prompt.js";

/**
 * The variables of a checkpoint's own chat template (a canvas model's: DiffusionGemma ships
 * Gemma 4's), in Hugging Face's conventions rather than the Tessera template's
 * (docs/model-contract.md, "Chat template"): messages as OpenAI's, each tool call
 * `{id, type, function: {name, arguments}}` with its arguments parsed into a mapping, as
 * transformers' server does before `apply_chat_template` (templates iterate them; Gemma 4's
 * writes each key in its own syntax); `tools`, `enable_thinking`, `add_generation_prompt`.
 * Arguments that are not a JSON object stay the string they are.
 */
export function checkpointTemplateVariables(v: ChatTemplateVariables): Record<string, unknown> {
  const messages = v.messages.map((m) => {
    const { tool_calls: calls, ...rest } = m;
    if (calls === undefined) return rest;
    return {
      ...rest,
      tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: argumentsValue(c.arguments) } })),
    };
  });
  return {
    messages,
    ...(v.tools.length > 0 ? { tools: v.tools } : {}),
    enable_thinking: v.enable_thinking,
    add_generation_prompt: v.add_generation_prompt,
  };
}

function argumentsValue(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : text;
  } catch {
    return text;
  }
}
