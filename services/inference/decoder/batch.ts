import type { ForwardInputs, KVShape } from "./forward.js";
import { BatchPast, type KVCache } from "./kv-cache.js";

/** Additive mask value of a blocked slot. */
export const BLOCKED = -1e9;

/**
 * One row of a forward: a sequence's clean past plus its current tokens, which sit at
 * absolute positions `kv.length, kv.length + 1, …` (pasts are whole blocks, so a row's
 * current tokens start a block).
 */
export interface BatchRow {
  kv: KVCache;
  tokens: ArrayLike<number>;
}

/**
 * Builds forward inputs for a set of rows: pads every row to the common P and S, blocks the
 * padded slots, and applies block-causal attention by absolute position (a query at p sees
 * a key at k iff floor(k / block) <= floor(p / block)). The mask and positions are reused
 * while the rows' shapes stay the same (between denoising steps only the tokens change), and
 * the past tensors are patched in place (see BatchPast).
 */
export class BatchBuilder {
  private readonly past: BatchPast;
  private layoutKey = "";
  private attentionMask: Float32Array = new Float32Array(0);
  private positionIds: BigInt64Array = new BigInt64Array(0);

  constructor(
    shape: KVShape,
    private readonly blockSize: number,
    private readonly padTokenId: number,
    /** Rebuild a kept past that the same rows outgrew with room to grow (BatchPast): the step loop's batches. */
    options: { roomToGrow?: boolean } = {},
  ) {
    this.past = new BatchPast(shape, options.roomToGrow === true);
  }

  build(rows: readonly BatchRow[]): ForwardInputs {
    const B = rows.length;
    let S = 0;
    for (const row of rows) S = Math.max(S, row.tokens.length);
    const { past: P, layers, mirror } = this.past.prepare(rows.map((r) => r.kv));

    let key = `${P}/${S}`;
    for (const row of rows) key += `,${row.kv.length}:${row.tokens.length}`;
    if (key !== this.layoutKey) {
      this.attentionMask = blockCausalMask(rows, P, S, this.blockSize);
      this.positionIds = positions(rows, S);
      this.layoutKey = key;
    }

    const inputIds = new BigInt64Array(B * S).fill(BigInt(this.padTokenId));
    rows.forEach((row, b) => {
      const base = b * S;
      for (let i = 0; i < row.tokens.length; i++) inputIds[base + i] = BigInt(row.tokens[i]!);
    });
    return {
      batch: B,
      seq: S,
      past: P,
      inputIds,
      positionIds: this.positionIds,
      attentionMask: this.attentionMask,
      pastKeyValues: layers,
      ...(Array.isArray(layers) ? { pastKept: true } : {}),
      ...(mirror !== undefined ? { pastMirror: mirror } : {}),
    };
  }

  /** Drop everything kept between forwards. */
  reset(): void {
    this.past.reset();
    this.layoutKey = "";
  }
}

function blockCausalMask(rows: readonly BatchRow[], P: number, S: number, blockSize: number): Float32Array {
  const width = P + S;
  const mask = new Float32Array(rows.length * S * width).fill(BLOCKED);
  rows.forEach((row, b) => {
    const pastLen = row.kv.length;
    const len = row.tokens.length;
    for (let i = 0; i < len; i++) {
      const base = (b * S + i) * width;
      const position = pastLen + i;
      const blockEnd = (Math.floor(position / blockSize) + 1) * blockSize;
      mask.fill(0, base, base + pastLen);
      mask.fill(0, base + P, base + P + Math.min(len, blockEnd - pastLen));
    }
  });
  return mask;
}

function positions(rows: readonly BatchRow[], S: number): BigInt64Array {
  const ids = new BigInt64Array(rows.length * S);
  rows.forEach((row, b) => {
    for (let i = 0; i < row.tokens.length; i++) ids[b * S + i] = BigInt(row.kv.length + i);
  });
  return ids;
}
