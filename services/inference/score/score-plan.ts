/**
 * How the readout rows of a Score request are grouped into forwards.
 *
 * Every row is a batch row of its own, padded to the longest row of its forward (see
 * scoreSuffixes), so one forward for all rows pays for the padding of every short row: with
 * the decision templates' questions of 20 to 90 tokens, a third of the work. Grouping rows of
 * similar length saves most of that, at the price of more forwards. A row's logits do not
 * depend on the rows it shares a forward with, so the grouping changes no value.
 *
 * Cost model, in units of one query attending to one key (a row token over a past of P attends
 * to P + S keys): a forward of n rows padded to S tokens costs n·S·(TOKEN + P + S), where
 * TOKEN is a token's own work (projections, MLP, output head) — about that of attending to
 * 1,024 keys for the models here — plus FORWARD, a forward's fixed cost (reading every weight
 * once, ONNX Runtime's per-run overhead, the trip to the worker thread), about 16 row tokens.
 * The plan is not sensitive to either: halving or doubling them gives the same groups, or a
 * plan within 2% of the best, on the decision benchmark's rows.
 */
const TOKEN = 1024;
const FORWARD_TOKENS = 16;

/**
 * Rows grouped into forwards, longest rows first, minimising the modelled cost; no forward has
 * more rows than `maxRows(S)` allows for its longest row S (a memory budget). Rows of the same
 * length always share forwards, in their given order.
 */
export function planReadoutForwards<R extends { tokens: ArrayLike<unknown> }>(
  rows: readonly R[],
  past: number,
  maxRows: (seq: number) => number,
): R[][] {
  if (rows.length === 0) return [];
  const sorted = [...rows].sort((a, b) => b.tokens.length - a.tokens.length);
  // Classes of equal length, longest first: [start, end) in `sorted` and the length.
  const classes: { start: number; end: number; seq: number }[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const seq = sorted[i]!.tokens.length;
    const last = classes[classes.length - 1];
    if (last !== undefined && last.seq === seq) last.end = i + 1;
    else classes.push({ start: i, end: i + 1, seq });
  }

  const forwardCost = FORWARD_TOKENS * (TOKEN + past);
  const groupCost = (first: number, last: number): number => {
    const seq = classes[first]!.seq;
    const n = classes[last]!.end - classes[first]!.start;
    const forwards = Math.max(1, Math.ceil(n / Math.max(1, maxRows(seq))));
    return forwards * forwardCost + n * seq * (TOKEN + past + seq);
  };

  // best[j]: cheapest plan for classes [0, j); from[j]: where its last group starts.
  const u = classes.length;
  const best = new Float64Array(u + 1).fill(Infinity);
  const from = new Int32Array(u + 1);
  best[0] = 0;
  for (let j = 1; j <= u; j++) {
    for (let i = 0; i < j; i++) {
      const cost = best[i]! + groupCost(i, j - 1);
      if (cost < best[j]!) {
        best[j] = cost;
        from[j] = i;
      }
    }
  }

  const groups: R[][] = [];
  for (let j = u; j > 0; j = from[j]!) {
    const first = classes[from[j]!]!;
    const members = sorted.slice(first.start, classes[j - 1]!.end);
    const size = Math.max(1, maxRows(first.seq));
    const chunked: R[][] = [];
    for (let k = 0; k < members.length; k += size) chunked.push(members.slice(k, k + size));
    groups.unshift(...chunked);
  }
  return groups;
}
