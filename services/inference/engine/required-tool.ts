import { withForcedTool, type ChatPrompt, type ChatTemplateVariables } from "../prompt/chat-prompt.js";
import type { ModelRuntime } from "./runtime.js";
import { scoreSuffixes } from "../score/score.js";
import type { TextTokenizer } from "../prompt/tokenizer.js";
import { Unsupported } from "../core/engine-errors.js";

/**
 * tool_choice "required" with several tools, honoured by construction: the model's probability
 * of each tool's name is read where the name of a forced call starts, and the most probable
 * tool is forced as a named tool_choice is (the prompt ends inside its call).
 *
 * The readout is the decision service's (score.ts, docs/architecture.md §6): the prefix is the forced
 * prompt up to `<tool_call>{"name": "`, each name a label, multi-token names by the chain rule.
 * The prompt the reply is generated from is that prefix, the chosen name, and the rest of the
 * forced call's opening (checked on every request), so each name is scored in the context
 * the forced prompt gives it. Score encodes the prefix and each name apart; with a GPT-2-style
 * pre-tokenizer those are the forced prompt's own tokens whenever the name starts and ends
 * with a letter or digit (the quotes around it are split off), which the tests check.
 */

/**
 * A forced_tool value that marks where the template writes the name. Letters and underscores
 * only: no template escapes it. Only its last occurrence counts, so a conversation holding it
 * changes nothing.
 */
const NAME_MARKER = "tessera_forced_tool_name_marker";

/** A forced prompt around the function name. */
export interface ForcedCallSplit {
  /** Up to where the name starts: the generation prompt, then `<tool_call>{"name": "`. */
  before: string;
  /** After the name: `", "arguments": `. */
  after: string;
}

export type RenderTemplate = (variables: ChatTemplateVariables) => string;

export interface ToolChoiceContext {
  /** The serving id asked for (named in errors). */
  model: string;
  /** The model's chat template. */
  render: RenderTemplate;
}

export interface RequiredToolChoice {
  /** The chosen tool's name. */
  tool: string;
  /** The prompt forced to that tool: generation runs on it. */
  prompt: ChatPrompt;
  /** `prompt` rendered. */
  text: string;
  /**
   * One per candidate (`requiredTools` order): Score's value of the name, a log-probability
   * when any name has several tokens, otherwise the raw logit at the one answer slot (both
   * rank the names as their probabilities do).
   */
  scores: number[];
  /** Tokens the readout read (Score's input tokens: the prefix once, each name's slot once). */
  scoredTokens: number;
}

/**
 * Chooses and forces the tool of a `requiredTools` prompt: one Score readout (the prefix's
 * complete blocks once, then one batched forward for every name's tokens), then the argmax,
 * the first candidate on ties.
 */
export async function chooseRequiredTool(
  engine: ModelRuntime,
  prompt: ChatPrompt,
  context: ToolChoiceContext,
  signal?: AbortSignal,
): Promise<RequiredToolChoice> {
  const candidates = prompt.requiredTools;
  if (candidates.length < 2) throw new Error("chooseRequiredTool: the prompt has no tools to choose from");
  const { render } = context;
  const split = requireSplit(prompt, context);
  const names = candidates.map((name) => renderedName(prompt, context, split, name));

  const scored = await scoreSuffixes(engine, { prefix: split.before, suffixes: [{ text: "", labels: names }] }, signal);
  const scores = scored.results[0]!.logits;
  const best = pickHighest(scores);
  const tool = candidates[best]!;

  const forced = withForcedTool(prompt, tool);
  const text = render(forced.variables);
  if (text !== split.before + names[best]! + split.after) {
    throw unsupported(context.model, `its chat template writes the forced call of "${tool}" around other text than the others'`);
  }
  return { tool, prompt: forced, text, scores, scoredTokens: scored.inputTokens };
}

/**
 * What CountTokens counts for a `requiredTools` prompt before any tool is chosen: the forced
 * prompt of the candidate whose name has the most tokens (the first on ties), so a quota
 * reservation made from it covers the prompt that generation will run on.
 */
export function longestForcedPrompt(tokenizer: TextTokenizer, prompt: ChatPrompt, context: ToolChoiceContext): string {
  const split = requireSplit(prompt, context);
  const names = prompt.requiredTools.map((name) => renderedName(prompt, context, split, name));
  const tokens = names.map((name) => tokenizer.encode(name).length);
  return split.before + names[pickHighest(tokens)]! + split.after;
}

/** The index of the highest value; the first one on ties. NaN never wins (index 0 when all are NaN). */
export function pickHighest(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) {
    const v = values[i]!;
    const b = values[best]!;
    if (v > b || (Number.isNaN(b) && !Number.isNaN(v))) best = i;
  }
  return best;
}

/**
 * Where a template writes forced_tool: the text before and after the name's last occurrence in
 * the prompt rendered with a marker name. Undefined when the template does not write it.
 */
export function forcedCallSplit(variables: ChatTemplateVariables, render: RenderTemplate): ForcedCallSplit | undefined {
  const text = render({ ...variables, tool_choice: "required", forced_tool: NAME_MARKER });
  const at = text.lastIndexOf(NAME_MARKER);
  if (at < 0) return undefined;
  return { before: text.slice(0, at), after: text.slice(at + NAME_MARKER.length) };
}

function requireSplit(prompt: ChatPrompt, context: ToolChoiceContext): ForcedCallSplit {
  const split = forcedCallSplit(prompt.variables, context.render);
  if (split === undefined) throw unsupported(context.model, "its chat template does not write forced_tool into the prompt");
  return split;
}

/**
 * A name as the template writes it between `before` and `after`. A name JSON leaves as it is
 * (all names the gateway accepts: [a-zA-Z0-9_-]) is written as it is, like the marker; any other
 * is rendered to see what the template makes of it.
 */
function renderedName(prompt: ChatPrompt, context: ToolChoiceContext, split: ForcedCallSplit, name: string): string {
  if (JSON.stringify(name) === `"${name}"`) return name;
  const text = context.render(withForcedTool(prompt, name).variables);
  const { before, after } = split;
  if (text.length <= before.length + after.length || !text.startsWith(before) || !text.endsWith(after)) {
    throw unsupported(context.model, `its chat template writes the forced call of "${name}" around other text than the others'`);
  }
  return text.slice(before.length, text.length - after.length);
}

function unsupported(model: string, why: string): Unsupported {
  return new Unsupported(
    `model "${model}" cannot honour tool_choice "required" with several tools: ${why} (docs/model-contract.md, forced_tool)`,
  );
}
