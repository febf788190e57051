import { Tokenizer } from "@huggingface/tokenizers";
import type { ChatTemplateVariables } from "./chat-prompt.js";
import { USER_TEXT_CLOSE, USER_TEXT_OPEN } from "../../../lib/user-text-span.js";

/**
 * User text is text: a special token's spelling typed in a message (`<|im_end|>\n<|im_start|>system`,
 * Gemma's `<|turn>`) must not become the control token, or a user could write a turn of any role.
 * The template's own markup must. So before rendering, every special token's text inside a user
 * string is replaced by a placeholder (a marker and one private-use code point naming the token);
 * after rendering, the prompt is tokenized in runs: the template's text as usual (its special
 * tokens are control tokens), each placeholder as its token's text, tokenized with special tokens
 * split (as OpenAI does), so it is counted as the text it is.
 */
export interface UserTextGuard {
  /** A user string with every special token's text (and the marker itself) replaced by placeholders. */
  escape(text: string): string;
  /** Token ids of a text rendered from escaped user strings. */
  encode(rendered: string): number[];
}

/** Starts a placeholder; followed by itself (the marker typed by the user) or by U+F0000 + the special token's index. */
const MARKER = "\u{10FFFD}";
const FIRST = 0xf0000;
const PLACEHOLDER = /\u{10FFFD}(\u{10FFFD}|[\u{F0000}-\u{FFFFD}])/gu;

interface AddedTokenJson {
  content?: unknown;
  special?: unknown;
}

export function userTextGuard(tokenizerJson: object, tokenizerConfig: object, encode: (text: string) => number[]): UserTextGuard {
  const added = ((tokenizerJson as { added_tokens?: AddedTokenJson[] }).added_tokens ?? []).filter(
    (t): t is { content: string; special: true } => t.special === true && typeof t.content === "string" && t.content !== "",
  );
  const specials = added.map((t) => t.content).slice(0, 0xffffd - FIRST);
  const index = new Map(specials.map((s, i) => [s, i]));
  // Longest first, so that a token that begins another is not matched in its place.
  const escapeRe = new RegExp(
    [...specials]
      .sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .concat(MARKER)
      .join("|"),
    "gu",
  );
  let textOnly: ((text: string) => number[]) | undefined;
  /** The tokenizer without its special tokens: their spelling is tokenized as the text it is. */
  const encodeAsText = (text: string) => {
    if (textOnly === undefined) {
      const json = tokenizerJson as { added_tokens?: AddedTokenJson[] };
      const plain = new Tokenizer({ ...json, added_tokens: (json.added_tokens ?? []).filter((t) => t.special !== true) }, tokenizerConfig);
      textOnly = (t) => plain.encode(t, { add_special_tokens: false }).ids;
    }
    return textOnly(text);
  };

  return {
    escape(text) {
      if (specials.length === 0 && !text.includes(MARKER)) return text;
      return text.replace(escapeRe, (found) =>
        found === MARKER ? MARKER + MARKER : MARKER + String.fromCodePoint(FIRST + index.get(found)!),
      );
    },
    encode(rendered) {
      if (!rendered.includes(MARKER)) return encode(rendered);
      const ids: number[] = [];
      let from = 0;
      for (const m of rendered.matchAll(PLACEHOLDER)) {
        if (m.index > from) ids.push(...encode(rendered.slice(from, m.index)));
        const code = m[1]!;
        ids.push(...encodeAsText(code === MARKER ? MARKER : (specials[code.codePointAt(0)! - FIRST] ?? code)));
        from = m.index + m[0].length;
      }
      if (from < rendered.length) ids.push(...encode(rendered.slice(from)));
      return ids;
    },
  };
}

/** A JSON-like value with every string in it (object keys included) passed through `escape`. */
export function escapeStrings<T>(value: T, escapeText: (text: string) => string): T {
  if (typeof value === "string") return escapeText(value) as T;
  if (Array.isArray(value)) return value.map((v) => escapeStrings(v, escapeText)) as T;
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      Object.defineProperty(out, escapeText(k), {
        value: escapeStrings(v, escapeText),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out as T;
  }
  return value;
}

/** Chat template variables with every user string escaped: the messages (all but their role), the tools, the schema, the forced tool's name. */
export function escapeChatVariables(variables: ChatTemplateVariables, guard: Pick<UserTextGuard, "escape">): ChatTemplateVariables {
  const escapeText = (text: string) => guard.escape(text);
  return {
    ...variables,
    messages: variables.messages.map(({ role, ...rest }) => ({ role, ...escapeStrings(rest, escapeText) })),
    tools: escapeStrings(variables.tools, escapeText),
    forced_tool: escapeText(variables.forced_tool),
    json_schema: escapeStrings(variables.json_schema, escapeText),
  };
}

const USER_SPAN = /\u{10FFFB}([^\u{10FFFB}\u{10FFFC}]*)\u{10FFFC}/gu;

/**
 * A prompt rendered elsewhere whose user text is marked (lib/user-text-span.ts: a decision's state
 * and instructions), tokenized: the marks removed, the text between them as text (escaped, as a
 * chat's user strings are), the rest as usual. Text without marks is tokenized as it is.
 */
export function encodeMarkedText(text: string, guard: UserTextGuard, encode: (text: string) => number[]): number[] {
  if (!text.includes(USER_TEXT_OPEN) && !text.includes(USER_TEXT_CLOSE)) return encode(text);
  return guard.encode(text.replace(USER_SPAN, (_, inner: string) => guard.escape(inner)));
}
