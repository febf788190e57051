// Prompt rendering, byte for byte as the service does it (docs/model-contract.md):
// the chat template for conversations, decision.json's templates for decisions.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template, parse, tokenize } from "@huggingface/jinja";

const TEMPLATES = join(dirname(fileURLToPath(import.meta.url)), "..", "templates");
export const MASK = "<|mask|>";
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

/** The contract's value-to-text rule. */
export function valueText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

// Decision templates are evaluated literally, as services/decision/render.ts does: no
// trim_blocks, no lstrip_blocks, the template's final newline kept.
const compiled = new Map();
function template(src) {
  let t = compiled.get(src);
  if (!t) {
    t = new Template("");
    t.parsed = parse(tokenize(`${src}\n`, { lstrip_blocks: false, trim_blocks: false }));
    compiled.set(src, t);
  }
  return t;
}

/**
 * Same contract as services/decision/render.ts: question = {type, instructions, criteria}
 * in the API's shape. Returns {prefix, suffix, labels}; suffix ends with the mask slot.
 */
export function renderDecisionPrompt(cfg, state, question) {
  const prefix = template(cfg.prefix_template).render({ state: valueText(state) });
  const { type, instructions, criteria } = question;
  const vars = { instructions: valueText(instructions) };
  let labels;
  if (type === "noul") {
    vars.true_description = valueText(criteria?.true);
    vars.false_description = valueText(criteria?.false);
    labels = cfg.labels.noul.slice(0, 2);
  } else if (type === "choice") {
    const entries = Object.entries(criteria);
    labels = cfg.labels.choice.slice(0, entries.length);
    vars.options = entries.map(([name, description], i) => ({ label: labels[i], name, description: valueText(description) }));
  } else if (type === "score") {
    labels = cfg.labels.score.slice(0, criteria.length);
    vars.levels = criteria.map((text, i) => ({ label: labels[i], text: valueText(text) }));
  } else {
    throw new Error(`unknown question type ${type}`);
  }
  const suffix = template(cfg.question_templates[type]).render(vars) + MASK;
  return { prefix, suffix, labels };
}
