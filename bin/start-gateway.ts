import type { Server } from "node:http";
import type { Client } from "@connectrpc/connect";
import type { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import type { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { connectHolds } from "../gateway/admission.js";
import { createAuthThrottle } from "../gateway/auth-throttle.js";
import { createConnectMount } from "../gateway/connect-mount.js";
import { createCors } from "../gateway/cors.js";
import { type AccountingGate, createGate } from "../gateway/gate.js";
import { createRoutes } from "../gateway/routes/index.js";
import { createGatewayHandler } from "../gateway/server.js";
import type { Config } from "../lib/config.js";
import type { InferenceFor } from "../lib/inference-router.js";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import type { ReadinessCheck } from "../lib/readiness.js";
import type { ServiceMount } from "../lib/service-mount.js";
import { drain, listenGateway, listenOps } from "./http-lifecycle.js";

export interface GatewayWiring {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** What the gate authenticates, admits and settles with. */
  accounting: AccountingGate;
  registry: Client<typeof RegistryService>;
  decision: Client<typeof DecisionService>;
  inferenceFor: InferenceFor;
  readiness: readonly ReadinessCheck[];
  /** The services typed clients reach on the public port, through the gate (never accounting). */
  connect: ServiceMount;
}

export interface RunningGateway {
  server: Server;
  url: string;
  port: number;
  /** http://host:port of the operations port (TESSERA_OPS_PORT); undefined when there is none. */
  opsUrl: string | undefined;
  /** Stops accepting, lets requests in flight finish (then cancels them), waits for those past their deadline. */
  close(): Promise<void>;
}

/** The gateway of a process, embedded or distributed: its routes and Connect mount behind one gate, listening. */
export async function startGateway(w: GatewayWiring): Promise<RunningGateway> {
  const { config, logger, metrics } = w;
  const { gateway } = config;
  const { maxScoreWorkTokens } = config.limits;
  const gate = createGate({
    accounting: w.accounting,
    logger,
    authThrottle: createAuthThrottle({ failuresPerMinute: gateway.authFailuresPerMinute }),
  });
  const handler = createGatewayHandler({
    routes: createRoutes({
      maxDecisionWorkTokens: maxScoreWorkTokens,
      registry: w.registry,
      decision: w.decision,
      inferenceFor: w.inferenceFor,
      metrics,
      readiness: w.readiness,
      streamStallTimeoutMs: gateway.streamStallTimeoutMs,
      playground: gateway.playground,
    }),
    gate,
    logger,
    metrics,
    maxUrlBytes: gateway.maxUrlBytes,
    cors: createCors(gateway.corsOrigins),
    deadlineMs: gateway.requestDeadlineMs,
    connect: createConnectMount({
      routes: w.connect,
      gate,
      holds: connectHolds({ inferenceFor: w.inferenceFor, decision: w.decision, maxDecisionWorkTokens: maxScoreWorkTokens }),
    }),
  });
  const { server, port, url } = await listenGateway(handler, config, metrics, logger);
  const ops = await listenOps(handler, config, logger);
  return {
    server,
    url,
    port,
    opsUrl: ops?.url,
    async close() {
      await Promise.all([
        drain(server, config.server.shutdownTimeoutMs, logger),
        ops && drain(ops.server, config.server.shutdownTimeoutMs, logger),
      ]);
      // Handlers answered 504 past their deadline may still be finishing (and settling).
      await handler.flush();
      await handler.close();
    },
  };
}
