// The reply's tags (docs/model-contract.md) and scanning for them in text that arrives in pieces.

/** A pair of delimiters as the model spells them (its config's `special_tokens`), e.g. `<think>`, `</think>`. */
export type TagPair = readonly [open: string, close: string];

interface TagHit {
  index: number;
  tag: string;
}

export function findFirstTag(text: string, tags: readonly string[]): TagHit | null {
  let best: TagHit | null = null;
  for (const tag of tags) {
    const index = text.indexOf(tag);
    if (index >= 0 && (best === null || index < best.index)) best = { index, tag };
  }
  return best;
}

/**
 * Where a tag might be starting at the very end of `text` (text.length when nowhere). Every
 * tag has `<` only as its first character, so only the last `<` can start a partial tag.
 */
export function partialTagStart(text: string, tags: readonly string[]): number {
  const lt = text.lastIndexOf("<");
  if (lt < 0) return text.length;
  const tail = text.slice(lt);
  return tags.some((tag) => tag.length > tail.length && tag.startsWith(tail)) ? lt : text.length;
}
