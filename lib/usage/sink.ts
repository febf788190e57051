import type { Client } from "@connectrpc/connect";
import type { AccountingService, SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";

/**
 * Where the gateway sends the exact usage of a finished request. Embedded mode settles
 * directly with the accounting service; distributed mode publishes to a JetStream stream
 * that accounting consumes, so usage is never lost when an accounting replica dies.
 */
export interface UsageSink {
  publish(event: SettleRequest): Promise<void>;
}

export function directUsageSink(accounting: Client<typeof AccountingService>): UsageSink {
  return {
    async publish(event) {
      await accounting.settle(event);
    },
  };
}
