import { RevisionConflictError } from "../../lib/store/index.js";
import { recordUsage, utcDay } from "./ledger.js";
import type { AccountingBuckets, ProgressEntry, SettledMarker } from "./records.js";
import { guardStore } from "./request-checks.js";

/** The settle marker a request's last checkpoint becomes when its gateway or process died before it settled. */
export function markerOfCheckpoint({ at, keyId, prompt, completion, decisionInput }: ProgressEntry): SettledMarker {
  return { at, day: utcDay(at), keyId, prompt, completion, decisionInput };
}

/**
 * The one settle sequence, for Settle, the gateway sweep and crash recovery: marker, then
 * ledger, then charge.
 *
 * - The marker (`settled`, created at `marker`; `keyId` is the key it charges) is the compare-and-set that decides who
 *   charges: only the call that creates it runs `charge`, so the quota is charged at most once.
 * - The ledger entry is written from the marker that won (this one, or the one found), keyed
 *   by the request, so a settle that died half-way is completed by the next attempt without
 *   counting anything twice. A request that used nothing leaves no ledger entry.
 * - When the ledger write fails, the marker this call created is dropped again (nothing is
 *   charged yet), so that a retry does the whole settle.
 *
 * Returns whether this call created the marker.
 */
export async function settleOnce(
  buckets: Pick<AccountingBuckets, "settled" | "ledger">,
  keyId: string,
  marker: string,
  settled: SettledMarker,
  charge: (settled: SettledMarker) => Promise<void>,
): Promise<boolean> {
  let first = true;
  let winner = settled;
  try {
    await buckets.settled.create(marker, settled);
  } catch (err) {
    if (!(err instanceof RevisionConflictError)) throw err;
    first = false;
    winner = (await buckets.settled.get(marker))?.value ?? settled;
  }
  try {
    if (winner.prompt + winner.completion + winner.decisionInput > 0) {
      await guardStore(recordUsage(buckets.ledger, keyId, winner.day, marker, winner));
    }
  } catch (err) {
    if (first) await buckets.settled.delete(marker).catch(() => undefined);
    throw err;
  }
  if (first) await charge(winner);
  return first;
}
