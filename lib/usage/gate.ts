import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { SettleRequestSchema, SettleResponseSchema, type AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { UsageSink } from "./sink.js";

/** The accounting calls of the request path (the gateway's AccountingGate). */
export type RequestPathAccounting = Pick<Client<typeof AccountingService>, "authenticate" | "admit" | "settle">;

/**
 * The request path's accounting with Settle sent to a usage sink instead of the service:
 * in distributed mode the gateway publishes usage to the JetStream stream that accounting
 * consumes, so a settlement survives the death of any accounting replica. Authenticate and
 * Admit still go to the service. The answer is "not yet known" (already_settled false).
 */
export function settleThroughSink(accounting: RequestPathAccounting, sink: UsageSink): RequestPathAccounting {
  return {
    authenticate: (request, options) => accounting.authenticate(request, options),
    admit: (request, options) => accounting.admit(request, options),
    async settle(request) {
      await sink.publish(create(SettleRequestSchema, request));
      return create(SettleResponseSchema, { alreadySettled: false });
    },
  };
}

/**
 * The request path's accounting with every Admit naming this gateway instance (distributed
 * mode), once `instance()` gives one: holds and checkpoints then record it, and accounting's
 * sweep settles and releases them if this process dies (services/accounting/sweep.ts).
 */
export function admittingAs(accounting: RequestPathAccounting, instance: () => string | undefined): RequestPathAccounting {
  return {
    authenticate: (request, options) => accounting.authenticate(request, options),
    admit(request, options) {
      const gatewayInstance = instance();
      return accounting.admit(gatewayInstance === undefined ? request : { ...request, gatewayInstance }, options);
    },
    settle: (request, options) => accounting.settle(request, options),
  };
}
