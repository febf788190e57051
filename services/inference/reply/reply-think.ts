import { findFirstTag, partialTagStart, type TagPair } from "./reply-tags.js";

// Stage 1: thinking span -> reasoning; everything else -> body. The tags themselves are never
// passed on: a stray `</think>` in the body (or a nested `<think>`) is dropped, so thinking
// markup can never reach content.

export class ThinkSplitter {
  private pending = "";
  private inThink: boolean;

  constructor(
    private readonly sinks: {
      inThink: boolean;
      /** The thinking span's delimiters. */
      tags: TagPair;
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
      const hit = findFirstTag(this.pending, this.sinks.tags);
      if (hit === null) break;
      this.emit(this.pending.slice(0, hit.index));
      this.pending = this.pending.slice(hit.index + hit.tag.length);
      if (hit.tag === this.sinks.tags[1] && this.inThink) {
        this.inThink = false;
        this.sinks.onReasoningEnd();
      } else if (hit.tag === this.sinks.tags[0] && !this.inThink) {
        this.inThink = true;
      }
    }
    const keep = partialTagStart(this.pending, this.sinks.tags);
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
