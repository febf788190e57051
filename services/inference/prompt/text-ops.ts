import { BoundedTemplate } from "../../../lib/bounded-template.js";
import type { ChatTemplateVariables } from "./chat-prompt.js";
import { tokenizeScorePrompts, type ScorePromptTokens } from "./score-tokens.js";
import { createTextTokenizer, type TextTokenizer } from "./tokenizer.js";
import { escapeChatVariables } from "./user-text.js";

/** What a model directory's text work needs: the tokenizer files and the chat template. */
export interface TextSource {
  tokenizerJson: object;
  tokenizerConfig: object;
  chatTemplate: string;
}

/** A Score request's tokens: the prompts (score-tokens.ts) and each distinct label's ids. */
export interface ScoreTokens extends ScorePromptTokens {
  labelIds: number[][];
}

/** The chat template could not render a conversation (a client error, not a fault). */
export class TemplateRenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TemplateRenderError";
  }
}

/** The text work of a request, the same on the main thread and on the text worker. */
export interface TextOps {
  encode(text: string): number[];
  /** A prompt rendered from escaped user text (user-text.ts), tokenized. */
  encodePrompt(rendered: string): number[];
  renderEncode(variables: ChatTemplateVariables): number[];
  scoreTokens(prefix: string, suffixes: readonly string[], labels: readonly string[]): ScoreTokens;
}

export function createTextOps(tokenizer: TextTokenizer, template: Pick<BoundedTemplate, "render">): TextOps {
  return {
    encode: (text) => tokenizer.encode(text),
    encodePrompt: (rendered) => tokenizer.userText.encode(rendered),
    renderEncode(variables) {
      let text: string;
      try {
        text = template.render(escapeChatVariables(variables, tokenizer.userText) as unknown as Record<string, unknown>);
      } catch (err) {
        throw new TemplateRenderError(err instanceof Error ? err.message : String(err));
      }
      return tokenizer.userText.encode(text);
    },
    scoreTokens(prefix, suffixes, labels) {
      return { ...tokenizeScorePrompts(tokenizer, prefix, suffixes), labelIds: labels.map((label) => tokenizer.encode(label)) };
    },
  };
}

export function textOpsOf(source: TextSource): TextOps {
  return createTextOps(createTextTokenizer(source.tokenizerJson, source.tokenizerConfig), new BoundedTemplate(source.chatTemplate));
}

/**
 * The most UTF-8 bytes of text one token can stand for: the longest token of the vocabulary
 * and of the added tokens, each character counted at its UTF-8 length (for a byte-level
 * vocabulary, whose characters each stand for one byte, that over-counts, which only loosens
 * the bound). A text of B bytes is at least ceil(B / this) tokens.
 */
export function maxTokenBytes(tokenizerJson: object): number {
  const json = tokenizerJson as { model?: { vocab?: unknown }; added_tokens?: { content?: unknown }[] };
  let most = 1;
  const vocab = json.model?.vocab;
  const words: unknown[] = Array.isArray(vocab)
    ? vocab.map((entry) => (Array.isArray(entry) ? entry[0] : entry))
    : typeof vocab === "object" && vocab !== null
      ? Object.keys(vocab)
      : [];
  for (const entry of json.added_tokens ?? []) words.push(entry.content);
  for (const word of words) if (typeof word === "string") most = Math.max(most, Buffer.byteLength(word));
  return most;
}
