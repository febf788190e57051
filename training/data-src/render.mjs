// Chat prompt rendering, byte for byte as the service does it (docs/model-contract.md), and the
// decision templates of the bundled model. Decision prompts are rendered by the service's own
// module, lib/decision-types/render.ts (prepare-data.mjs and check-bundle.mjs run under tsx).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const TEMPLATES = join(dirname(fileURLToPath(import.meta.url)), "..", "templates");
export const EOS = "<|im_end|>";

export const chatTemplateSource = readFileSync(join(TEMPLATES, "chat_template.jinja"), "utf8");
export const decisionConfig = JSON.parse(readFileSync(join(TEMPLATES, "decision.json"), "utf8"));
const chatTemplate = new Template(chatTemplateSource);

/** JSON with the separators of Python's json.dumps and of the template's `tojson`. */
export function pyJson(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  return `{${Object.entries(value)
    .map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`)
    .join(", ")}}`;
}

/** Renders a conversation; `vars` holds tools, tool_choice, forced_tool, response_format, ... */
export function renderChat(messages, vars = {}) {
  return chatTemplate.render({ messages, add_generation_prompt: false, ...vars });
}

/**
 * Prompt and target reply of the last assistant turn: the reply is what the template renders
 * for that message, up to and including the end of turn.
 */
export function chatPromptAndReply(messages, vars = {}) {
  const history = messages.slice(0, -1);
  const last = messages[messages.length - 1];
  if (last.role !== "assistant") throw new Error("the last message must be the assistant's");
  const prompt = renderChat(history, { ...vars, add_generation_prompt: true });
  const full = renderChat(messages, vars);
  if (!full.startsWith(prompt)) throw new Error("template prefix mismatch");
  let reply = full.slice(prompt.length);
  if (reply.endsWith("\n")) reply = reply.slice(0, -1);
  if (!reply.endsWith(EOS)) throw new Error("reply must end with the end of turn");
  return { prompt, reply };
}
