/**
 * The exact bytes of a token. A byte-level BPE vocabulary (GPT-2's ByteLevel) spells each byte
 * as one printable character; mapping those characters back gives the bytes, even for a
 * token holding part of a UTF-8 character (whose decoded text is only U+FFFD). Added tokens
 * (special tokens such as `<think>`) and other vocabularies are their text in UTF-8.
 */

/** GPT-2's bytes_to_unicode, inverted: character code → byte. */
function unicodeToByte(): Map<number, number> {
  const map = new Map<number, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    map.set(printable ? b : 256 + extra++, b);
  }
  return map;
}

interface TokenizerJson {
  decoder?: { type?: string } | null;
  added_tokens?: { id: number }[];
}

export function createTokenBytes(
  tokenizerJson: object,
  pieceOf: (id: number) => string | undefined,
  decode: (ids: readonly number[]) => string,
): (id: number) => Uint8Array {
  const json = tokenizerJson as TokenizerJson;
  const byteLevel = json.decoder?.type === "ByteLevel";
  const added = new Set((json.added_tokens ?? []).map((t) => t.id));
  const table = byteLevel ? unicodeToByte() : undefined;
  const cache = new Map<number, Uint8Array>();
  const encoder = new TextEncoder();
  const compute = (id: number): Uint8Array => {
    const piece = table !== undefined && !added.has(id) ? pieceOf(id) : undefined;
    if (piece !== undefined) {
      const bytes: number[] = [];
      for (const char of piece) {
        const byte = table!.get(char.codePointAt(0)!);
        if (byte === undefined) return encoder.encode(decode([id]));
        bytes.push(byte);
      }
      return Uint8Array.from(bytes);
    }
    return encoder.encode(decode([id]));
  };
  return (id) => {
    let bytes = cache.get(id);
    if (bytes === undefined) {
      bytes = compute(id);
      if (cache.size < 1 << 18) cache.set(id, bytes);
    }
    return bytes;
  };
}
