import { casUpdate, type KvBucket } from "../../lib/store/index.js";
import { ledgerKey, ledgerPrefix, type UsageDayRecord } from "./records.js";

/** YYYY-MM-DD of a time, in UTC. */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;

/** Whether `day` is a real calendar day written YYYY-MM-DD. */
export function isUtcDay(day: string): boolean {
  if (!DAY_RE.test(day)) return false;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(ms) && utcDay(ms) === day;
}

export interface UsageAmounts {
  prompt: number;
  completion: number;
  decisionInput: number;
}

/** Adds one settled request to its key's ledger for the day. */
export async function recordUsage(
  bucket: KvBucket<UsageDayRecord>,
  keyId: string,
  day: string,
  usage: UsageAmounts,
): Promise<void> {
  await casUpdate(bucket, ledgerKey(keyId, day), (current) => ({
    requests: (current?.requests ?? 0) + 1,
    prompt: (current?.prompt ?? 0) + usage.prompt,
    completion: (current?.completion ?? 0) + usage.completion,
    decisionInput: (current?.decisionInput ?? 0) + usage.decisionInput,
  }));
}

/** A key's ledger from `fromDay` to `toDay` (both included; "" = open end), in day order. */
export async function readUsage(
  bucket: KvBucket<UsageDayRecord>,
  keyId: string,
  fromDay: string,
  toDay: string,
): Promise<Array<{ day: string } & UsageDayRecord>> {
  const prefix = ledgerPrefix(keyId);
  const days: string[] = [];
  for await (const key of bucket.keys(prefix)) {
    const day = key.slice(prefix.length);
    if ((fromDay === "" || day >= fromDay) && (toDay === "" || day <= toDay)) days.push(day);
  }
  days.sort();
  const rows: Array<{ day: string } & UsageDayRecord> = [];
  for (const day of days) {
    const entry = await bucket.get(ledgerKey(keyId, day));
    if (entry) rows.push({ day, ...entry.value });
  }
  return rows;
}
