import { cutGemma4Call, type ParsedCall, parseGemma4Call } from "./reply-gemma4.js";
import { JsonBalance } from "./reply-json.js";
import type { ToolCallPiece } from "../core/model-engine.js";
import { findFirstTag, partialTagStart, type TagPair } from "./reply-tags.js";

// Stage 2: `<tool_call>…</tool_call>` spans -> tool calls; the rest -> text.

/** How a call's body is written between its tags (the model config's `tool_call_format`), as vLLM picks a tool parser per family. */
export type ToolCallFormat = "json" | "gemma4";

const CALL_BODIES: Record<ToolCallFormat, { parse(body: string): ParsedCall | null; cut(body: string): ParsedCall | null }> = {
  json: { parse: (body) => parseToolCall(body), cut: (body) => cutCall(body) },
  gemma4: { parse: parseGemma4Call, cut: cutGemma4Call },
};

type CallState = { kind: "text" } | { kind: "call"; body: string } | ForcedArgsState | { kind: "forcedTail"; sawBrace: boolean };

interface ForcedArgsState {
  kind: "forcedArgs";
  args: string;
  shape: "unknown" | "json" | "raw";
  balance: JsonBalance;
}

export class ToolCallExtractor {
  sawCall = false;
  private pending = "";
  private state: CallState;
  private nextIndex = 0;
  private forcedIndex = -1;

  constructor(
    private readonly deps: {
      enabled: boolean;
      /** The call's delimiters. */
      tags: TagPair;
      /** The body's syntax; default "json". */
      format?: ToolCallFormat;
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
        this.closeCutCall(state.body + rest);
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
    const open = this.pending.indexOf(this.deps.tags[0]);
    if (open >= 0) {
      if (open > 0) this.deps.onText(this.pending.slice(0, open));
      this.pending = this.pending.slice(open + this.deps.tags[0].length);
      this.state = { kind: "call", body: "" };
      return true;
    }
    const keep = partialTagStart(this.pending, [this.deps.tags[0]]);
    if (keep > 0) this.deps.onText(this.pending.slice(0, keep));
    this.pending = this.pending.slice(keep);
    return false;
  }

  private stepCall(state: { kind: "call"; body: string }): boolean {
    const hit = findFirstTag(this.pending, this.deps.tags);
    if (hit === null) {
      const keep = partialTagStart(this.pending, this.deps.tags);
      state.body += this.pending.slice(0, keep);
      this.pending = this.pending.slice(keep);
      return false;
    }
    const body = state.body + this.pending.slice(0, hit.index);
    this.pending = this.pending.slice(hit.index + hit.tag.length);
    if (hit.tag === this.deps.tags[1]) {
      this.closeCall(body, true);
      this.state = { kind: "text" };
    } else {
      // A new call opened before this one closed: settle this one, start the next.
      this.closeCall(body, false);
      this.state = { kind: "call", body: "" };
    }
    return true;
  }

  private get syntax() {
    return CALL_BODIES[this.deps.format ?? "json"];
  }

  private closeCall(body: string, closed: boolean): void {
    const call = this.syntax.parse(body);
    if (call === null) {
      this.deps.onText(this.deps.tags[0] + body + (closed ? this.deps.tags[1] : ""));
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

  /**
   * The reply ended inside a call (max_tokens cut it): a whole call is kept; a call whose name
   * is complete becomes a call with the arguments written so far, as a forced call does; one
   * cut before its name is dropped. The call's markup never goes out as text.
   */
  private closeCutCall(body: string): void {
    const whole = this.syntax.parse(body);
    const named = whole ?? this.syntax.cut(body);
    if (named === null) return;
    this.sawCall = true;
    this.deps.onCall({ index: this.nextIndex++, id: this.deps.newId(), name: named.name, arguments: named.arguments });
  }

  private stepForcedArgs(state: ForcedArgsState): boolean {
    const close = this.pending.indexOf(this.deps.tags[1]);
    const scanEnd = close >= 0 ? close : partialTagStart(this.pending, [this.deps.tags[1]]);
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
    this.pending = this.pending.slice(close + this.deps.tags[1].length);
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
    if (this.pending.startsWith(this.deps.tags[1])) {
      this.pending = this.pending.slice(this.deps.tags[1].length);
      this.state = { kind: "text" };
      return true;
    }
    if (this.deps.tags[1].startsWith(this.pending)) return false;
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

/** A cut call body whose name is complete: the name and the arguments' text so far; else null. */
function cutCall(body: string): { name: string; arguments: string } | null {
  const head = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")/.exec(body);
  if (head === null) return null;
  const name = JSON.parse(head[1]!) as string;
  if (name === "") return null;
  const args = /^\s*,\s*"(?:arguments|parameters)"\s*:\s*([\s\S]*)$/.exec(body.slice(head[0].length))?.[1]?.trim() ?? "";
  return { name, arguments: normalizeArguments(args) ?? args };
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
