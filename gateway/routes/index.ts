import type { Client } from "@connectrpc/connect";
import type { DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import type { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { InferenceFor } from "../../lib/inference-router.js";
import type { Metrics } from "../../lib/metrics.js";
import type { Route } from "../route.js";
import { chatCompletionsRoute } from "./chat-completions.js";
import { completionsRoute } from "./completions.js";
import { modelRetrieveRoute } from "./model-retrieve.js";
import { modelsRoute } from "./models.js";
import type { ReadinessCheck } from "../../lib/readiness.js";
import { healthzRoute, metricsRoute, readyzRoute } from "./operations.js";
import { playgroundRoutes } from "./playground.js";
import { responseRetrieveRoute, responsesRoute } from "./responses.js";
import { systemoneRoute } from "./systemone.js";

export interface RouteTableDeps {
  registry: Client<typeof RegistryService>;
  decision: Client<typeof DecisionService>;
  inferenceFor: InferenceFor;
  metrics: Metrics;
  readiness: readonly ReadinessCheck[];
  /** See TextRouteDeps. */
  streamStallTimeoutMs?: number;
  /** See SystemoneRouteDeps. */
  maxDecisionWorkTokens?: number;
  /** Serve the playground page at `/` (TESSERA_PLAYGROUND; default on). */
  playground?: boolean;
}

/** Every HTTP route of the public port. Each is a small module in this folder. */
export function createRoutes(deps: RouteTableDeps): Route[] {
  return [
    healthzRoute(),
    readyzRoute(deps.readiness),
    metricsRoute(deps.metrics),
    modelsRoute(deps),
    modelRetrieveRoute(deps),
    chatCompletionsRoute(deps),
    responsesRoute(deps),
    responseRetrieveRoute(),
    completionsRoute(deps),
    systemoneRoute(deps),
    ...(deps.playground === false ? [] : playgroundRoutes()),
  ];
}
