import { randomBytes } from "node:crypto";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { ReadinessCheck } from "../../lib/readiness.js";

export interface AccountingReadinessOptions {
  /** The check's name in /readyz. */
  name: string;
  /** What a failure names, before its message ("accounting store", "accounting"). */
  label: string;
  timeoutMs?: number;
}

/**
 * Accounting and its store answer: authenticating a key nobody can hold must be refused
 * Unauthenticated, which proves the store was read.
 */
export function accountingReadiness(
  accounting: Pick<Client<typeof AccountingService>, "authenticate">,
  { name, label, timeoutMs }: AccountingReadinessOptions,
): ReadinessCheck {
  const probeKey = `tsr_readiness_${randomBytes(24).toString("base64url")}`;
  return {
    name,
    check: async () => {
      try {
        await accounting.authenticate({ apiKey: probeKey }, timeoutMs === undefined ? {} : { timeoutMs });
        return true;
      } catch (err) {
        return err instanceof ConnectError && err.code === Code.Unauthenticated ? true : `${label}: ${(err as Error).message}`;
      }
    },
  };
}
