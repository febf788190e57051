import { casUpdate, type KvBucket } from "../../lib/store/index.js";
import { emptyCounters, reservedTokens, type QuotaCounters, type QuotaKind } from "./records.js";

export type ReserveOutcome = { ok: true } | { ok: false; available: number };

/**
 * Holds `tokens` of an account's `kind` quota for a request. Refused when the tokens used,
 * plus those held by requests in flight, plus these would pass the quota — and also when
 * nothing at all is left, even for a reservation of 0. Reservations expire after
 * `reservationTtlMs`, so a request that never settles (its process died) stops holding
 * quota then; expired holds are dropped whenever the record is next written.
 */
export async function reserveQuota(
  bucket: KvBucket<QuotaCounters>,
  accountId: string,
  args: { requestKey: string; kind: QuotaKind; tokens: number; quota: number; now: number; reservationTtlMs: number; holder?: string },
): Promise<ReserveOutcome> {
  let outcome: ReserveOutcome = { ok: true };
  await casUpdate(bucket, accountId, (current) => {
    const counters = pruneExpired(current ?? emptyCounters(), args.now);
    // A repeated Admit of the same request replaces its earlier hold rather than adding to it.
    const others = without(counters.res, args.requestKey);
    const held = reservedTokens({ ...counters, res: others }, args.now)[args.kind];
    const used = args.kind === "text" ? counters.textUsed : counters.decisionUsed;
    const available = Math.max(0, args.quota - used - held);
    if (available === 0 || args.tokens > available) {
      outcome = { ok: false, available };
      return undefined;
    }
    outcome = { ok: true };
    const hold = { k: args.kind, n: args.tokens, x: args.now + args.reservationTtlMs, ...(args.holder ? { g: args.holder } : {}) };
    return { ...counters, res: { ...others, [args.requestKey]: hold } };
  });
  return outcome;
}

/**
 * Charges a settled request: adds its usage to the account's used tokens and drops its
 * reservation, if it had one (a request admitted under an unlimited quota, or one whose
 * usage arrives without an Admit, has none).
 */
export async function chargeQuota(
  bucket: KvBucket<QuotaCounters>,
  accountId: string,
  args: { requestKey: string; text: number; decision: number; now: number },
): Promise<void> {
  await casUpdate(bucket, accountId, (current) => {
    const before = current ?? emptyCounters();
    const counters = pruneExpired(before, args.now);
    const held = counters.res[args.requestKey];
    const others = without(counters.res, args.requestKey);
    if (!held && args.text === 0 && args.decision === 0 && counters === before) return undefined;
    return {
      textUsed: counters.textUsed + args.text,
      decisionUsed: counters.decisionUsed + args.decision,
      res: others,
    };
  });
}

/** The counters without expired reservations (the same object when none expired). */
function pruneExpired(counters: QuotaCounters, now: number): QuotaCounters {
  const expired = Object.entries(counters.res).filter(([, r]) => r.x <= now);
  if (expired.length === 0) return counters;
  const res = { ...counters.res };
  for (const [id] of expired) delete res[id];
  return { ...counters, res };
}

function without<V>(record: Record<string, V>, key: string): Record<string, V> {
  if (!(key in record)) return record;
  const copy = { ...record };
  delete copy[key];
  return copy;
}
