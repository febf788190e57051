import { randomBytes } from "node:crypto";

/**
 * Turns the model's decoded reply text into the three things a chat completion carries:
 * visible `content`, `reasoning` (the thinking span) and OpenAI `tool_calls`.
 *
 * Text arrives in chunks (one per committed block) split anywhere, even inside a tag. The
 * parser passes text on as soon as it cannot be part of a tag and holds back only a tail that
 * might still become one, so any split of the same text gives the same concatenated result.
 *
 * The reply grammar is the one of docs/model-contract.md:
 * - thinking: the prompt ended in `<think>\n`, so text up to `</think>` is reasoning;
 * - tool calls: `<tool_call>{"name": "...", "arguments": {...}}</tool_call>`;
 * - forced tool: the prompt ended in `<tool_call>{"name": "<fn>", "arguments": `, so the reply
 *   continues inside the arguments and is always a call of that function.
 * The decoder must keep these tags when it decodes (they are special tokens) and trim the
 * end of turn itself.
 */

export interface ToolCallPiece {
  /** Position of the call in the reply's tool_calls. */
  index: number;
  /** Set on the first piece of a call. */
  id?: string;
  /** Set on the first piece of a call. */
  name?: string;
  /** The next piece of the call's arguments (a JSON string once all pieces are joined). */
  arguments: string;
}

export interface ReplyDelta {
  content: string;
  reasoning: string;
  toolCalls: ToolCallPiece[];
}

export interface ReplyParserOptions {
  /** The prompt ended in `<think>\n` (ignored with `forcedTool`: the template skips it then). */
  thinking: boolean;
  /** JSON modes: content is the first JSON object of the reply. */
  jsonMode: boolean;
  /** The prompt ended inside a call of this function. */
  forcedTool?: string;
  /** When false (tool_choice "none"), `<tool_call>` spans stay as content. Default true. */
  toolCalls?: boolean;
  /** Id generator for tool calls; default `call_` + 24 random alphanumerics. */
  newToolCallId?: () => string;
}

export interface ReplyParser {
  push(text: string): ReplyDelta;
  finish(): ReplyDelta & { sawToolCall: boolean };
}

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";
const THINK_TAGS = [THINK_OPEN, THINK_CLOSE];
const CALL_TAGS = [CALL_OPEN, CALL_CLOSE];
const REASONING_SEPARATOR = "\n\n";

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export function newToolCallId(): string {
  // 248 = 4 * 62: rejecting bytes above it keeps every character equally likely.
  let id = "call_";
  while (id.length < 29) {
    for (const byte of randomBytes(32)) {
      if (byte < 248 && id.length < 29) id += ALPHANUMERIC[byte % 62];
    }
  }
  return id;
}

export function createReplyParser(options: ReplyParserOptions): ReplyParser {
  let out: ReplyDelta = emptyDelta();
  let finished = false;

  const reasoning = new TrimmedSink((text) => (out.reasoning += text), REASONING_SEPARATOR);
  const content = new TrimmedSink((text) => (out.content += text), "");
  const json = options.jsonMode ? new FirstJsonObject((text) => content.write(text)) : null;
  const writeContent = (text: string): void => (json ? json.write(text) : content.write(text));

  const calls = new ToolCallExtractor({
    enabled: options.toolCalls ?? true,
    forcedTool: options.forcedTool,
    newId: options.newToolCallId ?? newToolCallId,
    onText: writeContent,
    onCall: (piece) => out.toolCalls.push(piece),
  });
  const think = new ThinkSplitter({
    inThink: options.thinking && options.forcedTool === undefined,
    onReasoning: (text) => reasoning.write(text),
    onReasoningEnd: () => reasoning.endSegment(),
    onBody: (text) => calls.write(text),
  });

  const take = (): ReplyDelta => {
    const delta = out;
    out = emptyDelta();
    return delta;
  };

  return {
    push(text: string): ReplyDelta {
      if (finished) throw new Error("reply parser: push after finish");
      calls.begin();
      think.write(text);
      return take();
    },
    finish() {
      if (finished) throw new Error("reply parser: finish called twice");
      finished = true;
      calls.begin();
      think.end();
      calls.end();
      json?.end();
      reasoning.end();
      content.end();
      return { ...take(), sawToolCall: calls.sawCall };
    },
  };
}

function emptyDelta(): ReplyDelta {
  return { content: "", reasoning: "", toolCalls: [] };
}

// ---------------------------------------------------------------------------------------------
// Tag scanning

interface TagHit {
  index: number;
  tag: string;
}

function findFirstTag(text: string, tags: readonly string[]): TagHit | null {
  let best: TagHit | null = null;
  for (const tag of tags) {
    const index = text.indexOf(tag);
    if (index >= 0 && (best === null || index < best.index)) best = { index, tag };
  }
  return best;
}

/**
 * Where a tag might be starting at the very end of `text` (text.length when nowhere). Every
 * tag has `<` only as its first character, so only the last `<` can start a partial tag.
 */
function partialTagStart(text: string, tags: readonly string[]): number {
  const lt = text.lastIndexOf("<");
  if (lt < 0) return text.length;
  const tail = text.slice(lt);
  return tags.some((tag) => tag.length > tail.length && tag.startsWith(tail)) ? lt : text.length;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: thinking span -> reasoning; everything else -> body. The tags themselves are never
// passed on: a stray `</think>` in the body (or a nested `<think>`) is dropped, so thinking
// markup can never reach content.

class ThinkSplitter {
  private pending = "";
  private inThink: boolean;

  constructor(
    private readonly sinks: {
      inThink: boolean;
      onReasoning(text: string): void;
      onReasoningEnd(): void;
      onBody(text: string): void;
    },
  ) {
    this.inThink = sinks.inThink;
  }

  write(text: string): void {
    this.pending += text;
    for (;;) {
      const hit = findFirstTag(this.pending, THINK_TAGS);
      if (hit === null) break;
      this.emit(this.pending.slice(0, hit.index));
      this.pending = this.pending.slice(hit.index + hit.tag.length);
      if (hit.tag === THINK_CLOSE && this.inThink) {
        this.inThink = false;
        this.sinks.onReasoningEnd();
      } else if (hit.tag === THINK_OPEN && !this.inThink) {
        this.inThink = true;
      }
    }
    const keep = partialTagStart(this.pending, THINK_TAGS);
    this.emit(this.pending.slice(0, keep));
    this.pending = this.pending.slice(keep);
  }

  end(): void {
    this.emit(this.pending);
    this.pending = "";
  }

  private emit(text: string): void {
    if (text === "") return;
    if (this.inThink) this.sinks.onReasoning(text);
    else this.sinks.onBody(text);
  }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: `<tool_call>…</tool_call>` spans -> tool calls; the rest -> text.

type CallState = { kind: "text" } | { kind: "call"; body: string } | ForcedArgsState | { kind: "forcedTail"; sawBrace: boolean };

interface ForcedArgsState {
  kind: "forcedArgs";
  args: string;
  shape: "unknown" | "json" | "raw";
  balance: JsonBalance;
}

class ToolCallExtractor {
  sawCall = false;
  private pending = "";
  private state: CallState;
  private nextIndex = 0;
  private forcedIndex = -1;

  constructor(
    private readonly deps: {
      enabled: boolean;
      forcedTool: string | undefined;
      newId: () => string;
      onText(text: string): void;
      onCall(piece: ToolCallPiece): void;
    },
  ) {
    this.state =
      deps.forcedTool === undefined ? { kind: "text" } : { kind: "forcedArgs", args: "", shape: "unknown", balance: new JsonBalance() };
  }

  /** Called before each push/finish: the forced call's header goes out with the first delta. */
  begin(): void {
    if (this.deps.forcedTool === undefined || this.forcedIndex >= 0) return;
    this.forcedIndex = this.nextIndex++;
    this.sawCall = true;
    this.deps.onCall({
      index: this.forcedIndex,
      id: this.deps.newId(),
      name: this.deps.forcedTool,
      arguments: "",
    });
  }

  write(text: string): void {
    this.pending += text;
    let progressed = true;
    while (progressed && this.pending !== "") progressed = this.step();
  }

  end(): void {
    const rest = this.pending;
    this.pending = "";
    const state = this.state;
    switch (state.kind) {
      case "text":
        if (rest) this.deps.onText(rest);
        break;
      case "call":
        // The reply ended inside a call: keep it if what is there is a whole call.
        this.closeCall(state.body + rest, false);
        break;
      case "forcedArgs":
        this.closeForcedArgs(state.args + rest);
        break;
      case "forcedTail":
        // Only a partial `</tool_call>` can be left here; it belongs to the call.
        break;
    }
    this.state = { kind: "text" };
  }

  /** Consumes what it can from `pending`; false when it must wait for more text. */
  private step(): boolean {
    const state = this.state;
    switch (state.kind) {
      case "text":
        return this.stepText();
      case "call":
        return this.stepCall(state);
      case "forcedArgs":
        return this.stepForcedArgs(state);
      case "forcedTail":
        return this.stepForcedTail(state);
    }
  }

  private stepText(): boolean {
    if (!this.deps.enabled) {
      this.deps.onText(this.pending);
      this.pending = "";
      return false;
    }
    const open = this.pending.indexOf(CALL_OPEN);
    if (open >= 0) {
      if (open > 0) this.deps.onText(this.pending.slice(0, open));
      this.pending = this.pending.slice(open + CALL_OPEN.length);
      this.state = { kind: "call", body: "" };
      return true;
    }
    const keep = partialTagStart(this.pending, [CALL_OPEN]);
    if (keep > 0) this.deps.onText(this.pending.slice(0, keep));
    this.pending = this.pending.slice(keep);
    return false;
  }

  private stepCall(state: { kind: "call"; body: string }): boolean {
    const hit = findFirstTag(this.pending, CALL_TAGS);
    if (hit === null) {
      const keep = partialTagStart(this.pending, CALL_TAGS);
      state.body += this.pending.slice(0, keep);
      this.pending = this.pending.slice(keep);
      return false;
    }
    const body = state.body + this.pending.slice(0, hit.index);
    this.pending = this.pending.slice(hit.index + hit.tag.length);
    if (hit.tag === CALL_CLOSE) {
      this.closeCall(body, true);
      this.state = { kind: "text" };
    } else {
      // A new call opened before this one closed: settle this one, start the next.
      this.closeCall(body, false);
      this.state = { kind: "call", body: "" };
    }
    return true;
  }

  private closeCall(body: string, closed: boolean): void {
    const call = parseToolCall(body);
    if (call === null) {
      this.deps.onText(CALL_OPEN + body + (closed ? CALL_CLOSE : ""));
      return;
    }
    this.sawCall = true;
    this.deps.onCall({
      index: this.nextIndex++,
      id: this.deps.newId(),
      name: call.name,
      arguments: call.arguments,
    });
  }

  private stepForcedArgs(state: ForcedArgsState): boolean {
    const close = this.pending.indexOf(CALL_CLOSE);
    const scanEnd = close >= 0 ? close : partialTagStart(this.pending, [CALL_CLOSE]);
    for (let i = 0; i < scanEnd; i++) {
      const ch = this.pending[i]!;
      state.args += ch;
      if (state.shape === "unknown" && !/\s/.test(ch)) {
        // Anything but an object or array is not a well-formed call: it runs to the tag.
        state.shape = ch === "{" || ch === "[" ? "json" : "raw";
      }
      if (state.shape === "json" && state.balance.feed(ch)) {
        this.closeForcedArgs(state.args);
        this.pending = this.pending.slice(i + 1);
        this.state = { kind: "forcedTail", sawBrace: false };
        return true;
      }
    }
    if (close < 0) {
      this.pending = this.pending.slice(scanEnd);
      return false;
    }
    this.closeForcedArgs(state.args);
    this.pending = this.pending.slice(close + CALL_CLOSE.length);
    this.state = { kind: "text" };
    return true;
  }

  private closeForcedArgs(raw: string): void {
    // Without a balanced object the text runs up to `</tool_call>`, so it also holds the
    // `}` that closes `{"name": …, "arguments": …`; drop it.
    let text = raw.trim();
    if (!text.startsWith("{") && !text.startsWith("[") && text.endsWith("}")) {
      text = text.slice(0, -1).trim();
    }
    this.deps.onCall({ index: this.forcedIndex, arguments: normalizeArguments(text) ?? (text || "{}") });
  }

  private stepForcedTail(state: { kind: "forcedTail"; sawBrace: boolean }): boolean {
    let i = 0;
    while (i < this.pending.length) {
      const ch = this.pending[i]!;
      if (/\s/.test(ch)) i++;
      else if (ch === "}" && !state.sawBrace) {
        state.sawBrace = true;
        i++;
      } else break;
    }
    this.pending = this.pending.slice(i);
    if (this.pending === "") return false;
    if (this.pending.startsWith(CALL_CLOSE)) {
      this.pending = this.pending.slice(CALL_CLOSE.length);
      this.state = { kind: "text" };
      return true;
    }
    if (CALL_CLOSE.startsWith(this.pending)) return false;
    // The model went on without closing the call: the rest is ordinary reply text.
    this.state = { kind: "text" };
    return true;
  }
}

/** A tool call body `{"name": …, "arguments": …}`, or null when it is not one. */
function parseToolCall(body: string): { name: string; arguments: string } | null {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isPlainObject(value)) return null;
  const name = value["name"];
  if (typeof name !== "string" || name === "") return null;
  const args = "arguments" in value ? value["arguments"] : value["parameters"];
  if (args === undefined || args === null) return { name, arguments: "{}" };
  if (isPlainObject(args)) return { name, arguments: JSON.stringify(args) };
  if (typeof args === "string") {
    const normalized = normalizeArguments(args);
    return normalized === null ? null : { name, arguments: normalized };
  }
  return null;
}

/** Arguments text as compact JSON of an object, or null when it is not a JSON object. */
function normalizeArguments(text: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value === "string") {
    // Arguments given as a JSON string holding the object.
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  return isPlainObject(value) ? JSON.stringify(value) : null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// Stage 3 (JSON modes): content is the first JSON object of the reply. Text before the first
// `{` is skipped; text after its balanced close is dropped. A reply with no `{` at all keeps
// its text ("return what there is"), sent when the reply ends.

class FirstJsonObject {
  private state: "before" | "inside" | "after" = "before";
  private before = "";
  private readonly balance = new JsonBalance();

  constructor(private readonly onText: (text: string) => void) {}

  write(text: string): void {
    let rest = text;
    if (this.state === "before") {
      const open = rest.indexOf("{");
      if (open < 0) {
        this.before += rest;
        return;
      }
      this.before = "";
      this.state = "inside";
      rest = rest.slice(open);
    }
    if (this.state === "inside") {
      for (let i = 0; i < rest.length; i++) {
        if (this.balance.feed(rest[i]!)) {
          this.onText(rest.slice(0, i + 1));
          this.state = "after";
          return;
        }
      }
      this.onText(rest);
    }
  }

  end(): void {
    if (this.state === "before" && this.before !== "") this.onText(this.before);
    this.before = "";
  }
}

/** Tracks JSON nesting character by character, strings and escapes included. */
class JsonBalance {
  private depth = 0;
  private inString = false;
  private escaped = false;

  /** Feeds one character; true when it closes the outermost value. */
  feed(ch: string): boolean {
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (ch === "\\") this.escaped = true;
      else if (ch === '"') this.inString = false;
      return false;
    }
    if (ch === '"') this.inString = true;
    else if (ch === "{" || ch === "[") this.depth++;
    else if (ch === "}" || ch === "]") {
      this.depth--;
      return this.depth === 0;
    }
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Output: whitespace around a span is trimmed. Trailing whitespace is held until text follows
// it, so it never goes out at the end of a span whatever the chunking.

class TrimmedSink {
  private atSegmentStart = true;
  private emittedAny = false;
  private heldSpace = "";

  constructor(
    private readonly emit: (text: string) => void,
    private readonly separator: string,
  ) {}

  write(text: string): void {
    if (this.atSegmentStart) {
      text = text.replace(/^\s+/, "");
      if (text === "") return;
    }
    let cut = text.length;
    while (cut > 0 && /\s/.test(text[cut - 1]!)) cut--;
    const body = text.slice(0, cut);
    if (body !== "") {
      const lead = this.atSegmentStart ? (this.emittedAny ? this.separator : "") : this.heldSpace;
      this.emit(lead + body);
      this.heldSpace = "";
      this.atSegmentStart = false;
      this.emittedAny = true;
    }
    this.heldSpace += text.slice(cut);
  }

  /** The current span ended (`</think>`): drop its trailing space, separate the next one. */
  endSegment(): void {
    this.atSegmentStart = true;
    this.heldSpace = "";
  }

  end(): void {
    this.heldSpace = "";
  }
}
