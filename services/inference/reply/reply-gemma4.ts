// Gemma 4's tool-call body (`tool_call_format: "gemma4"`), between `<|tool_call>` and
// `<tool_call|>`: `call:NAME{key:value,…}`. Keys are bare (or `<|"|>`-quoted); a string value
// is `<|"|>…<|"|>` with nothing escaped inside; objects `{k:v,…}`, arrays `[v,…]`, numbers,
// `true`, `false`, `null` as in JSON. This is what Gemma 4's chat template writes for a call
// whose arguments are a mapping (its `format_argument` macro), and so what the model writes.

const QUOTE = '<|"|>';

/** A parsed call: its name and its arguments as compact JSON of an object. */
export interface ParsedCall {
  name: string;
  arguments: string;
}

const HEAD = /^\s*call:([A-Za-z_][\w.-]*)\s*/;

/** A whole call body, or null when it is not one. */
export function parseGemma4Call(body: string): ParsedCall | null {
  const head = HEAD.exec(body);
  if (head === null) return null;
  const reader = new DslReader(body, head[0].length);
  const args = reader.value();
  if (args === undefined || typeof args !== "object" || args === null || Array.isArray(args)) return null;
  reader.skipSpace();
  if (!reader.atEnd) return null;
  return { name: head[1]!, arguments: JSON.stringify(args) };
}

/** A body cut short (the reply ended inside the call): the name and the argument text so far, or null before the name is complete. */
export function cutGemma4Call(body: string): ParsedCall | null {
  const head = HEAD.exec(body);
  if (head === null || head.index + head[0].length >= body.length) {
    // The name is complete only once something follows it (the arguments' `{`).
    return null;
  }
  return { name: head[1]!, arguments: body.slice(head[0].length).trim() };
}

type Value = string | number | boolean | null | Value[] | { [key: string]: Value };

/** A recursive-descent reader of one DSL value; undefined where the text is not one. */
class DslReader {
  constructor(
    private readonly text: string,
    private at: number,
  ) {}

  get atEnd(): boolean {
    return this.at >= this.text.length;
  }

  skipSpace(): void {
    while (this.at < this.text.length && /\s/.test(this.text[this.at]!)) this.at++;
  }

  value(): Value | undefined {
    this.skipSpace();
    if (this.text.startsWith(QUOTE, this.at)) return this.quoted();
    const ch = this.text[this.at];
    if (ch === "{") return this.object();
    if (ch === "[") return this.array();
    if (ch === '"') return this.jsonString();
    return this.scalar();
  }

  private quoted(): string | undefined {
    const end = this.text.indexOf(QUOTE, this.at + QUOTE.length);
    if (end < 0) return undefined;
    const s = this.text.slice(this.at + QUOTE.length, end);
    this.at = end + QUOTE.length;
    return s;
  }

  private jsonString(): string | undefined {
    const m = /^"(?:[^"\\]|\\.)*"/.exec(this.text.slice(this.at));
    if (m === null) return undefined;
    this.at += m[0].length;
    return JSON.parse(m[0]) as string;
  }

  private scalar(): Value | undefined {
    const m = /^[^,}\]\s]+/.exec(this.text.slice(this.at));
    if (m === null) return undefined;
    let v: unknown;
    try {
      v = JSON.parse(m[0]);
    } catch {
      return undefined;
    }
    if (typeof v !== "number" && typeof v !== "boolean" && v !== null) return undefined;
    this.at += m[0].length;
    return v;
  }

  private key(): string | undefined {
    this.skipSpace();
    if (this.text.startsWith(QUOTE, this.at)) return this.quoted();
    if (this.text[this.at] === '"') return this.jsonString();
    const m = /^[^:,{}[\]\s]+/.exec(this.text.slice(this.at));
    if (m === null) return undefined;
    this.at += m[0].length;
    return m[0];
  }

  private object(): Value | undefined {
    this.at++; // {
    const out: { [key: string]: Value } = {};
    this.skipSpace();
    if (this.text[this.at] === "}") {
      this.at++;
      return out;
    }
    for (;;) {
      const key = this.key();
      if (key === undefined) return undefined;
      this.skipSpace();
      if (this.text[this.at] !== ":") return undefined;
      this.at++;
      const v = this.value();
      if (v === undefined) return undefined;
      out[key] = v;
      this.skipSpace();
      const sep = this.text[this.at++];
      if (sep === "}") return out;
      if (sep !== ",") return undefined;
    }
  }

  private array(): Value | undefined {
    this.at++; // [
    const out: Value[] = [];
    this.skipSpace();
    if (this.text[this.at] === "]") {
      this.at++;
      return out;
    }
    for (;;) {
      const v = this.value();
      if (v === undefined) return undefined;
      out.push(v);
      this.skipSpace();
      const sep = this.text[this.at++];
      if (sep === "]") return out;
      if (sep !== ",") return undefined;
    }
  }
}
