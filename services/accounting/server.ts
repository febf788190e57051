import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { mountService, type ServiceMount } from "../../lib/service-mount.js";
import { createAccountingService, type AccountingDeps } from "./service.js";

export { createAccountingService, type AccountingDeps, type AccountingServiceImpl } from "./service.js";

/** The accounting service's mount (lib/service-mount.ts): its own port, the in-process transport, tests. */
export const accountingRoutes = (deps: AccountingDeps): ServiceMount => mountService(AccountingService, createAccountingService(deps));
