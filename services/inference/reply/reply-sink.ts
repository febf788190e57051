// Output: whitespace around a span is trimmed. Trailing whitespace is held until text follows
// it, so it never goes out at the end of a span whatever the chunking.

export class TrimmedSink {
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
