import type { ConnectRouter } from "@connectrpc/connect";
import { DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { createDecisionService, type DecisionDeps } from "./service.js";

/** Mounts the decision service on a Connect router (embedded router transport or an HTTP server). */
export const decisionRoutes = (deps: DecisionDeps) => (router: ConnectRouter) =>
  router.service(DecisionService, createDecisionService(deps));
