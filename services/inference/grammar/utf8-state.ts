import type { GrammarState } from "./frontier-rule.js";

/**
 * Keeps a constrained reply valid UTF-8. XGrammar matches byte-level tokens byte by byte and
 * lets through bytes that never occur in UTF-8 (C0, C1, F5–FF) and some invalid sequences
 * (overlong forms, surrogates); decoded, those become U+FFFD, and a string the grammar
 * counted as 12 characters can decode to more (a failed maxLength). This wraps a grammar
 * state and also refuses, in the mask and in accept, every token whose bytes would not
 * continue the reply as valid UTF-8.
 */
export class Utf8CheckedState implements GrammarState {
  /** Continuation bytes still needed by the current character, and the range of the next one. */
  private need = 0;
  private lo = 0x80;
  private hi = 0xbf;
  private readonly masks = new Map<string, Int32Array>();

  constructor(
    private readonly inner: GrammarState & { dispose?(): void },
    private readonly tokenBytes: readonly Uint8Array[],
  ) {}

  async allowed(): Promise<Int32Array> {
    const grammar = await this.inner.allowed();
    const utf8 = this.validMask();
    const out = new Int32Array(grammar.length);
    for (let w = 0; w < grammar.length; w++) out[w] = grammar[w]! & (utf8[w] ?? -1);
    return out;
  }

  accept(token: number): boolean {
    const next = step({ need: this.need, lo: this.lo, hi: this.hi }, this.tokenBytes[token]);
    if (next === undefined || !this.inner.accept(token)) return false;
    ({ need: this.need, lo: this.lo, hi: this.hi } = next);
    return true;
  }

  forcedText(): string {
    // Forced text is a JS string: encoding it gives valid UTF-8, unless a character is pending.
    return this.need === 0 ? this.inner.forcedText() : "";
  }

  terminated(): boolean {
    return this.inner.terminated();
  }

  dispose(): void {
    this.inner.dispose?.();
  }

  /** Tokens valid from the current UTF-8 state, as a bitmask (computed once per state). */
  private validMask(): Int32Array {
    const key = `${this.need}:${this.lo}:${this.hi}`;
    let mask = this.masks.get(key);
    if (mask === undefined) {
      mask = new Int32Array(Math.ceil(this.tokenBytes.length / 32));
      const state = { need: this.need, lo: this.lo, hi: this.hi };
      this.tokenBytes.forEach((bytes, v) => {
        if (step(state, bytes) !== undefined) mask![v >> 5]! |= 1 << (v & 31);
      });
      this.masks.set(key, mask);
    }
    return mask;
  }
}

interface Utf8Step {
  need: number;
  lo: number;
  hi: number;
}

/** The UTF-8 state after `bytes`, or undefined when they are not a valid continuation. */
export function step(state: Utf8Step, bytes: Uint8Array | undefined): Utf8Step | undefined {
  if (bytes === undefined) return undefined;
  let { need, lo, hi } = state;
  for (const b of bytes) {
    if (need > 0) {
      if (b < lo || b > hi) return undefined;
      need--;
      lo = 0x80;
      hi = 0xbf;
      continue;
    }
    if (b < 0x80) continue;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b === 0xe0) [need, lo] = [2, 0xa0];
    else if (b === 0xed) [need, hi] = [2, 0x9f];
    else if (b >= 0xe1 && b <= 0xef) need = 2;
    else if (b === 0xf0) [need, lo] = [3, 0x90];
    else if (b === 0xf4) [need, hi] = [3, 0x8f];
    else if (b >= 0xf1 && b <= 0xf3) need = 3;
    else return undefined;
  }
  return { need, lo, hi };
}
