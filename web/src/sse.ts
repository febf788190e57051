/**
 * Reads a `text/event-stream` body: yields the data of each event (multi-line data joined by
 * `\n`), skipping comments and events without data. Ends at the end of the body.
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
    yield* parser.push(`${decoder.decode()}\n\n`);
  } finally {
    reader.releaseLock();
  }
}

/** The line protocol of server-sent events, fed text as it arrives (any split). */
export class SseParser {
  private buffer = "";
  private data: string[] = [];

  *push(text: string): Generator<string> {
    this.buffer += text;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (match === null || (match[0] === "\r" && match.index === this.buffer.length - 1)) return;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      if (line === "") {
        if (this.data.length > 0) yield this.data.join("\n");
        this.data = [];
      } else if (line.startsWith("data:")) {
        const value = line.slice(5);
        this.data.push(value.startsWith(" ") ? value.slice(1) : value);
      }
    }
  }
}
