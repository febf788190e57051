import { casUpdate, type KvBucket } from "../../lib/store/index.js";
import type { GatewayBeat } from "../../lib/heartbeats/gateway-instances.js";
import type { Logger } from "../../lib/logger.js";
import { chargeQuota } from "./quota.js";
import type { AccountingBuckets } from "./records.js";
import { markerOfCheckpoint, settleOnce } from "./settle-once.js";

export interface SweepReport {
  /** Requests of dead gateways that had checkpointed, charged their last checkpoint. */
  chargedCheckpoints: number;
  /** Holds of requests of dead gateways, released. */
  releasedHolds: number;
}

/**
 * Distributed mode's recovery of requests whose gateway died (kill -9), run periodically by
 * every accounting replica: a request's hold and checkpoints name the gateway instance that
 * admitted it, and an instance whose heartbeat entry is gone (expired: the process stopped
 * beating) is dead. A holder must be found dead by two passes in a row before anything is
 * done, so a gateway whose entry lapsed while NATS was briefly away has a pass to beat again.
 *
 * - A dead gateway's checkpointed request is settled with its last checkpoint, exactly once:
 *   creating its settle marker is the compare-and-set that decides which replica (or the
 *   request's own late usage event) settles it; the winner writes the ledger entry and
 *   charges the quota, dropping the hold (settle-once.ts, the sequence Settle runs too).
 * - A dead gateway's remaining holds are released.
 */
export function createGatewaySweep(buckets: AccountingBuckets, gateways: KvBucket<GatewayBeat>, log: Logger, clock = Date.now) {
  let suspects = new Set<string>();

  return async function sweep(): Promise<SweepReport> {
    const report: SweepReport = { chargedCheckpoints: 0, releasedHolds: 0 };
    const deadNow = new Set<string>();
    const alive = new Set<string>();
    /** Dead for acting on: gone now and in the previous pass. Looked up when first met, so a gateway that started during the pass is seen alive. */
    const isDead = async (holder: string | undefined): Promise<boolean> => {
      if (holder === undefined || alive.has(holder)) return false;
      if (!deadNow.has(holder)) {
        if ((await gateways.get(holder)) !== null) {
          alive.add(holder);
          return false;
        }
        deadNow.add(holder);
      }
      return suspects.has(holder);
    };

    for await (const marker of buckets.progress.keys()) {
      const entry = await buckets.progress.get(marker);
      if (entry === null || !(await isDead(entry.value.gateway))) continue;
      const { keyId } = entry.value;
      const charged = await settleOnce(buckets, keyId, marker, markerOfCheckpoint(entry.value), async (settled) => {
        const accountId = (await buckets.keys.get(keyId))?.value.accountId;
        if (accountId === undefined) return;
        const usage = { text: settled.prompt + settled.completion, decision: settled.decisionInput };
        await chargeQuota(buckets.quotas, accountId, { requestKey: marker, ...usage, now: clock() });
      });
      if (charged) report.chargedCheckpoints++;
      await buckets.progress.delete(marker);
    }

    for await (const accountId of buckets.quotas.keys()) {
      const entry = await buckets.quotas.get(accountId);
      if (entry === null) continue;
      const doomed: string[] = [];
      for (const [requestKey, hold] of Object.entries(entry.value.res)) if (await isDead(hold.g)) doomed.push(requestKey);
      if (doomed.length === 0) continue;
      let released = 0;
      await casUpdate(buckets.quotas, accountId, (current) => {
        released = 0;
        if (current === undefined) return undefined;
        const res = { ...current.res };
        for (const requestKey of doomed) {
          if (requestKey in res) {
            delete res[requestKey];
            released++;
          }
        }
        return released === 0 ? undefined : { ...current, res };
      });
      report.releasedHolds += released;
    }

    suspects = deadNow;
    if (report.chargedCheckpoints + report.releasedHolds > 0) {
      log.warn({ ...report }, "requests of gateways that died: streams charged what they had delivered, holds released");
    }
    return report;
  };
}
