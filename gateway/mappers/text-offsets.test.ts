import { describe, expect, it } from "vitest";
import { codePoints, TextOffsets } from "./text-offsets.js";

const decodedLength = (bytes: Uint8Array) => codePoints(new TextDecoder().decode(bytes));

function offsetsOf(tokens: Uint8Array[]): number[] {
  const offsets = new TextOffsets();
  return tokens.map((t) => offsets.next(t));
}

/** The definition: a token's offset is the code points TextDecoder reads in the bytes before it. */
function expected(tokens: Uint8Array[]): number[] {
  return tokens.map((_, i) => decodedLength(Buffer.concat(tokens.slice(0, i))));
}

describe("TextOffsets", () => {
  it("counts characters, a split character at the token of its first byte", () => {
    const e = new TextEncoder();
    const [a, b] = [e.encode("é").subarray(0, 1), e.encode("é").subarray(1)];
    expect(offsetsOf([e.encode("x"), a, b, e.encode("!")])).toEqual([0, 1, 2, 2]);
    expect(offsetsOf([e.encode("😀"), e.encode("a")])).toEqual([0, 1]);
    expect(new TextOffsets(5).next(e.encode("a"))).toBe(5);
  });

  it("agrees with TextDecoder on random bytes cut into random tokens, invalid UTF-8 included", () => {
    let seed = 12345;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // Bytes around the UTF-8 boundaries are the interesting ones.
    const interesting = [0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff];
    for (let run = 0; run < 500; run++) {
      const tokens = Array.from({ length: 1 + Math.floor(random() * 12) }, () =>
        Uint8Array.from({ length: 1 + Math.floor(random() * 4) }, () =>
          random() < 0.7 ? interesting[Math.floor(random() * interesting.length)]! : Math.floor(random() * 256),
        ),
      );
      expect(offsetsOf(tokens)).toEqual(expected(tokens));
    }
  });
});
