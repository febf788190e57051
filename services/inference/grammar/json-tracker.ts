/**
 * Where a constrained reply is inside its JSON, followed byte by byte from the committed tokens
 * (the grammar guarantees the text is JSON in the template's style, so a lexer suffices): the
 * open values (object, array, string, number) innermost last, with the token each opened at
 * and, for objects and arrays, the separators seen. Outside JSON (an auto-tools reply's text
 * before `<tool_call>`, or the forced text after a call's arguments) the mode says so.
 */

export type FrameKind = "object" | "array" | "string" | "number";

export interface Frame {
  kind: FrameKind;
  /** Index (in the reply's committed tokens) of the first token after the one that opened it. */
  start: number;
  /** Objects and arrays: separators (`,`) seen at this level, so items = commas + 1 once one started. */
  commas: number;
  /** Loop-guard interventions inside this value (each adds closing pressure). */
  interventions: number;
}

/** `free`: text outside JSON; `json`: inside (or about to start) a value; `after`: the value is over. */
export type TrackerMode = "free" | "json" | "after";

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const NUMBER_BYTES = new Set([..."0123456789.eE+-"].map((c) => c.charCodeAt(0)));

export class JsonTracker {
  readonly frames: Frame[] = [];
  /** Every committed token of the reply, in order. */
  readonly tokens: number[] = [];
  mode: TrackerMode;
  private escaped = false;
  /** Free mode: the text's last bytes, to find the tag that opens a call. */
  private tail = "";

  constructor(
    /** `json` for a reply that is one value; `free` for auto tools (a value after each open tag). */
    start: "json" | "free",
    private readonly tokenBytes: readonly Uint8Array[],
    /** The tag that opens a tool call (`<tool_call>`): in free mode, a JSON value follows it. */
    private readonly openTag: string,
    /** What follows the top-level value: `free` for auto tools, `after` otherwise. */
    private readonly afterValue: TrackerMode = start === "free" ? "free" : "after",
    /** The value is an object after a head (Gemma 4's `call:NAME`): before its `{`, bytes are not JSON. */
    private readonly headBeforeObject = false,
  ) {
    this.mode = start;
  }

  get innermost(): Frame | undefined {
    return this.frames.at(-1);
  }

  push(token: number): void {
    const at = this.tokens.length;
    this.tokens.push(token);
    const bytes = this.tokenBytes[token];
    if (bytes === undefined) return;
    for (const b of bytes) this.byte(b, at + 1);
  }

  private byte(b: number, next: number): void {
    if (this.mode === "after") return;
    if (this.mode === "free") {
      this.tail = (this.tail + String.fromCharCode(b)).slice(-this.openTag.length);
      if (this.tail === this.openTag) {
        this.mode = "json";
        this.tail = "";
      }
      return;
    }
    const top = this.frames.at(-1);
    if (top?.kind === "string") {
      if (this.escaped) this.escaped = false;
      else if (b === BACKSLASH) this.escaped = true;
      else if (b === QUOTE) this.close();
      return;
    }
    if (top?.kind === "number") {
      if (NUMBER_BYTES.has(b)) return;
      this.close();
      this.byte(b, next);
      return;
    }
    const c = String.fromCharCode(b);
    if (this.headBeforeObject && top === undefined && c !== "{") return;
    if (c === '"') this.open("string", next);
    else if (c === "{") this.open("object", next);
    else if (c === "[") this.open("array", next);
    else if (c === "}" || c === "]") this.close();
    else if (c === ",") {
      if (top !== undefined) top.commas++;
    } else if (c === "-" || (c >= "0" && c <= "9")) this.open("number", next);
  }

  private open(kind: FrameKind, start: number): void {
    this.frames.push({ kind, start, commas: 0, interventions: 0 });
  }

  private close(): void {
    this.frames.pop();
    if (this.frames.length === 0) this.mode = this.afterValue;
  }
}
