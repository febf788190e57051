/**
 * Tokens that are never a reply token (the mask and pad tokens), as flags by token id.
 * They are left out of the softmax entirely, as if their logits were -inf.
 */
export function bannedTokens(vocab: number, ids: readonly number[]): Uint8Array {
  const flags = new Uint8Array(vocab);
  for (const id of ids) if (id >= 0 && id < vocab) flags[id] = 1;
  return flags;
}

/**
 * The tokens a reply never holds: the mask token, and the pad token unless it is a stop token.
 * An autoregressive model (block size 1 with a logits shift) has no mask token: its
 * `mask_token_id` is a placeholder that no read row ever sees, and no token is banned for it.
 */
export function bannedTokenIds(model: {
  maskTokenId: number;
  padTokenId: number;
  stopTokenIds?: readonly number[] | undefined;
  blockSize?: number;
  logitsShift?: 0 | 1;
}): number[] {
  const autoregressive = model.blockSize === 1 && model.logitsShift === 1;
  const ids = autoregressive ? [] : [model.maskTokenId];
  if (!(model.stopTokenIds ?? []).includes(model.padTokenId)) ids.push(model.padTokenId);
  return ids;
}
