import type { ConnectRouter } from "@connectrpc/connect";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createAccountingService, type AccountingDeps } from "./service.js";

export { createAccountingService, type AccountingDeps, type AccountingServiceImpl } from "./service.js";

/** Mounts the accounting service on a Connect router (connect-node adapter or in-memory transport). */
export const accountingRoutes = (deps: AccountingDeps) => (router: ConnectRouter) =>
  router.service(AccountingService, createAccountingService(deps));
