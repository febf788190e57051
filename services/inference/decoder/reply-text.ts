/** Where a stop sequence was found in a text. */
export interface StopMatch {
  start: number;
  end: number;
}

/** Finds `stop` sequences in reply text (plain substrings; empty ones are ignored). */
export class StopMatcher {
  readonly stops: string[];
  readonly maxLength: number;

  constructor(stops: readonly string[]) {
    this.stops = [...new Set(stops.filter((s) => s !== ""))];
    this.maxLength = this.stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  get empty(): boolean {
    return this.stops.length === 0;
  }

  /** The earliest occurrence of any stop sequence at or after `from`. */
  find(text: string, from = 0): StopMatch | undefined {
    let found: StopMatch | undefined;
    for (const stop of this.stops) {
      const start = text.indexOf(stop, from);
      if (start >= 0 && (found === undefined || start < found.start)) found = { start, end: start + stop.length };
    }
    return found;
  }

  /** Length of the longest end of `text` that could still grow into a stop sequence. */
  pendingLength(text: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > longest; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          longest = n;
          break;
        }
      }
    }
    return longest;
  }
}

const REPLACEMENT = "\uFFFD";

/** Text without the replacement characters of a UTF-8 sequence that more tokens may complete. */
export function withoutIncompleteTail(text: string): string {
  let end = text.length;
  while (end > 0 && text[end - 1] === REPLACEMENT) end--;
  return text.slice(0, end);
}

/**
 * Streams reply text block by block. Byte-level tokens can split a character, and a block
 * can end inside a stop sequence, so each delta holds back an incomplete character and any
 * end that could still become a stop sequence; what has been sent is always a prefix of the
 * final text.
 */
export class ReplyText {
  private sent = 0;

  constructor(
    private readonly decode: (ids: readonly number[]) => string,
    private readonly stops: StopMatcher,
  ) {}

  /** Characters of the reply text sent so far. */
  get sentLength(): number {
    return this.sent;
  }

  /** The new text after the reply's completed blocks `tokens`. */
  blockDelta(tokens: readonly number[]): string {
    const safe = withoutIncompleteTail(this.decode(tokens));
    const end = safe.length - this.stops.pendingLength(safe);
    if (end <= this.sent) return "";
    const delta = safe.slice(this.sent, end);
    this.sent = end;
    return delta;
  }

  /** The rest of the final (trimmed) reply text. */
  finalDelta(finalText: string): string {
    const delta = finalText.slice(this.sent);
    this.sent = finalText.length;
    return delta;
  }
}

/** A reply cut before the first stop sequence in its text: that text, and the fewest tokens whose text covers it. */
export function cutAtStop(
  all: readonly number[],
  decode: (ids: readonly number[]) => string,
  stops: StopMatcher,
): { text: string; count: number } {
  const match = stops.find(decode(all))!;
  const text = decode(all).slice(0, match.start);
  let lo = 0;
  let hi = all.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (withoutIncompleteTail(decode(all.slice(0, mid))).length >= match.start) hi = mid;
    else lo = mid + 1;
  }
  return { text, count: lo };
}

/**
 * How many of `tokens` (at least `from`) spell text that has been sent: the longest prefix
 * whose decoded text, without an incomplete character at its end, is at most `sentChars` long.
 */
export function tokensSent(tokens: readonly number[], from: number, sentChars: number, decode: (ids: readonly number[]) => string): number {
  let lo = from;
  let hi = tokens.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (withoutIncompleteTail(decode(tokens.slice(0, mid))).length <= sentChars) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
