import { DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { mountService, type ServiceMount } from "../../lib/service-mount.js";
import { createDecisionService, type DecisionDeps } from "./service.js";

/** The decision service's mount (lib/service-mount.ts): its own port, the gateway's public port, the in-process transport, tests. */
export const decisionRoutes = (deps: DecisionDeps): ServiceMount => mountService(DecisionService, createDecisionService(deps));
