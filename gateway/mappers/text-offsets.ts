/**
 * OpenAI's `text_offset` of the legacy completions: where each token starts in the text, in
 * Unicode code points (as Python indexes strings; the same as JavaScript string indices for text
 * without characters beyond the BMP).
 *
 * A token is bytes, not characters: a character may be split across tokens, and a model may
 * write bytes that are no UTF-8 at all (each maximal invalid part reads as one U+FFFD, as
 * TextDecoder decodes). Each character counts at the token holding its first byte, so a token's
 * offset is the number of characters that start in the tokens before it: exactly
 * `[...new TextDecoder().decode(bytesBefore)].length`, known as soon as the token arrives
 * (a character still incomplete is one code point whether it ends valid or as U+FFFD).
 */
export class TextOffsets {
  /** Continuation bytes the current character still needs; 0 between characters. */
  private need = 0;
  private low = 0x80;
  private high = 0xbf;

  constructor(private starts = 0) {}

  /** The offset of a token with these bytes, the previous tokens' bytes already read. */
  next(bytes: Uint8Array): number {
    const offset = this.starts;
    for (const byte of bytes) this.read(byte);
    return offset;
  }

  private read(byte: number): void {
    if (this.need > 0) {
      if (byte >= this.low && byte <= this.high) {
        this.need--;
        this.low = 0x80;
        this.high = 0xbf;
        return;
      }
      // The character so far is one U+FFFD, already counted; this byte starts anew.
      this.need = 0;
      this.low = 0x80;
      this.high = 0xbf;
    }
    this.starts++;
    if (byte <= 0x7f) return;
    if (byte >= 0xc2 && byte <= 0xdf) this.need = 1;
    else if (byte >= 0xe0 && byte <= 0xef) {
      this.need = 2;
      if (byte === 0xe0) this.low = 0xa0;
      if (byte === 0xed) this.high = 0x9f;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      this.need = 3;
      if (byte === 0xf0) this.low = 0x90;
      if (byte === 0xf4) this.high = 0x8f;
    }
    // Any other byte is an invalid one, a U+FFFD of its own.
  }
}

/** Code points of a text, where the reply's offsets start after an echoed prompt. */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
