import { RevisionConflictError, type KvBucket } from "../../lib/store/index.js";
import { ledgerKey, ledgerPrefix, type UsageDayRecord, type UsageEntry } from "./records.js";

/** YYYY-MM-DD of a time, in UTC. */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;

/** Whether `day` is a real calendar day written YYYY-MM-DD. */
export function isUtcDay(day: string): boolean {
  if (!DAY_RE.test(day)) return false;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(ms) && utcDay(ms) === day;
}

/**
 * Writes one settled request's ledger entry. The entry's key names the request, so writing
 * it again (a settle redone after a crash, a redelivered usage event) changes nothing: the
 * ledger counts every request exactly once.
 */
export async function recordUsage(
  bucket: KvBucket<UsageEntry>,
  keyId: string,
  day: string,
  requestKey: string,
  usage: UsageEntry,
): Promise<void> {
  try {
    await bucket.create(ledgerKey(keyId, day, requestKey), usage);
  } catch (err) {
    if (!(err instanceof RevisionConflictError)) throw err;
  }
}

/** A key's ledger from `fromDay` to `toDay` (both included; "" = open end), summed per day, in day order. */
export async function readUsage(
  bucket: KvBucket<UsageEntry>,
  keyId: string,
  fromDay: string,
  toDay: string,
): Promise<Array<{ day: string } & UsageDayRecord>> {
  const prefix = ledgerPrefix(keyId);
  const byDay = new Map<string, UsageDayRecord>();
  for await (const key of bucket.keys(prefix)) {
    const day = key.slice(prefix.length, prefix.length + 10);
    if ((fromDay !== "" && day < fromDay) || (toDay !== "" && day > toDay)) continue;
    const entry = await bucket.get(key);
    if (!entry) continue;
    const sum = byDay.get(day) ?? { requests: 0, prompt: 0, completion: 0, decisionInput: 0 };
    sum.requests += 1;
    sum.prompt += entry.value.prompt;
    sum.completion += entry.value.completion;
    sum.decisionInput += entry.value.decisionInput;
    byDay.set(day, sum);
  }
  return [...byDay.keys()].sort().map((day) => ({ day, ...byDay.get(day)! }));
}
