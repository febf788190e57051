import type { Logger } from "pino";
import { RevisionConflictError } from "../../lib/store/index.js";
import { ledgerKey, type AccountingBuckets, type QuotaCounters } from "./records.js";
import { markerOfCheckpoint, settleOnce } from "./settle-once.js";

export interface RecoveryReport {
  /** Holds of requests that were in flight when the process died, dropped. */
  releasedHolds: number;
  /** Settles that died between their marker and their ledger entry, completed. */
  completedSettles: number;
  /** Accounts whose used counters disagreed with the ledger, set to the ledger's sums. */
  correctedAccounts: number;
  /** Requests that died in flight after a checkpoint (a stream that had delivered), charged what it had delivered. */
  chargedCheckpoints: number;
}

/**
 * Makes the store exact again after the process that owned it died (kill -9, power loss), at
 * the start of the next one, before it serves: only for a store one process owns (the embedded
 * mode), where every hold belongs to a request of the dead process that can no longer complete.
 *
 * - A request that died in flight after a checkpoint (Admit `delivered`: a stream that had
 *   delivered content) and never settled is settled now with its last checkpoint.
 * - A settle that wrote its marker but not its ledger entry is completed from the marker.
 * - Every hold is released.
 * - Each account's used tokens are set to the sums of its keys' ledger entries: a settle that
 *   died between its ledger entry and its charge is charged, and nothing is charged twice. The
 *   ledger holds one entry per settled request, so it is the record both are made to agree with.
 */
export async function recoverAccounting(buckets: AccountingBuckets, log: Logger): Promise<RecoveryReport> {
  const report: RecoveryReport = { releasedHolds: 0, completedSettles: 0, correctedAccounts: 0, chargedCheckpoints: 0 };

  // A checkpoint is settled like any request, with no charge: the counters are set to the
  // ledger's sums below. A request that had settled is left as it was.
  for await (const marker of buckets.progress.keys()) {
    const entry = await buckets.progress.get(marker);
    if (entry !== null && (await settleOnce(buckets, entry.value.keyId, marker, markerOfCheckpoint(entry.value), async () => {}))) {
      report.chargedCheckpoints++;
    }
    await buckets.progress.delete(marker);
  }

  for await (const marker of buckets.settled.keys()) {
    const entry = await buckets.settled.get(marker);
    const keyId = entry?.value.keyId;
    if (entry === null || keyId === undefined) continue;
    const { prompt, completion, decisionInput, day } = entry.value;
    // A request that used nothing has no ledger entry (settle-once.ts).
    if (prompt + completion + decisionInput === 0) continue;
    try {
      await buckets.ledger.create(ledgerKey(keyId, day, marker), { prompt, completion, decisionInput });
      report.completedSettles++;
    } catch (err) {
      if (!(err instanceof RevisionConflictError)) throw err;
    }
  }

  const accountOfKey = new Map<string, string>();
  for await (const keyId of buckets.keys.keys()) {
    const key = await buckets.keys.get(keyId);
    if (key !== null) accountOfKey.set(keyId, key.value.accountId);
  }
  const sums = new Map<string, { text: number; decision: number }>();
  for await (const entryKey of buckets.ledger.keys()) {
    const accountId = accountOfKey.get(entryKey.slice(0, entryKey.indexOf(".")));
    const entry = await buckets.ledger.get(entryKey);
    if (accountId === undefined || entry === null) continue;
    const sum = sums.get(accountId) ?? { text: 0, decision: 0 };
    sum.text += entry.value.prompt + entry.value.completion;
    sum.decision += entry.value.decisionInput;
    sums.set(accountId, sum);
  }

  const accounts = new Set<string>(sums.keys());
  for await (const accountId of buckets.quotas.keys()) accounts.add(accountId);
  for (const accountId of accounts) {
    const current = await buckets.quotas.get(accountId);
    const sum = sums.get(accountId) ?? { text: 0, decision: 0 };
    const holds = current === null ? 0 : Object.keys(current.value.res).length;
    const agrees = current !== null && current.value.textUsed === sum.text && current.value.decisionUsed === sum.decision;
    if (agrees && holds === 0) continue;
    if (!agrees && (current !== null || sum.text + sum.decision > 0)) report.correctedAccounts++;
    report.releasedHolds += holds;
    const next: QuotaCounters = { textUsed: sum.text, decisionUsed: sum.decision, res: {} };
    await buckets.quotas.put(accountId, next);
  }
  if (report.releasedHolds + report.completedSettles + report.correctedAccounts + report.chargedCheckpoints > 0) {
    log.warn(
      { ...report },
      "accounting recovered after an unclean stop: streams charged what they had delivered, holds released, counters set to the ledger",
    );
  }
  return report;
}
