// Stage 3 (JSON modes): content is the first JSON object of the reply. Text before the first
// `{` is skipped; text after its balanced close is dropped. A reply with no `{` at all keeps
// its text ("return what there is"), sent when the reply ends.

export class FirstJsonObject {
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
export class JsonBalance {
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
