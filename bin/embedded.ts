import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type Client,
  type ServiceImpl,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import type { DescService } from "@bufbuild/protobuf";
import { createInProcessTransport } from "../lib/in-process-transport.js";
import { createCors } from "../gateway/cors.js";
import { createConnectMount } from "../gateway/connect-mount.js";
import { createRoutes } from "../gateway/routes/index.js";
import type { ReadinessCheck } from "../gateway/routes/operations.js";
import { createGate } from "../gateway/gate.js";
import { createGatewayHandler } from "../gateway/server.js";
import { drain, listenGateway, listenOps } from "./http-lifecycle.js";
import type { Config } from "../lib/config.js";
import { createInProcessWorkerDirectory } from "../lib/heartbeats/in-process.js";
import { startHeartbeats } from "../lib/heartbeats/publisher.js";
import type { WorkerDirectory } from "../lib/heartbeats/types.js";
import { createInferenceRouter } from "../lib/inference-router.js";
import type { Logger } from "../lib/logger.js";
import { createMetrics, type Metrics } from "../lib/metrics.js";
import { openEmbeddedAccounting } from "../services/accounting/embedded.js";
import { createDecisionService } from "../services/decision/service.js";
import { loadCatalog } from "../services/registry/catalog.js";
import { createRegistryService } from "../services/registry/service.js";
import { ensureFirstKey } from "./bootstrap.js";
import { servedModels, startInferenceWorker } from "./inference-worker.js";

export interface EmbeddedOptions {
  config: Config;
  logger: Logger;
  /** Where the first-start key is printed (stdout by default). */
  out?: NodeJS.WritableStream;
  metrics?: Metrics;
  /** Replaces the in-process worker directory (tests announce workers of their own). */
  workers?: WorkerDirectory;
  /**
   * How the services call each other: `in-process` (default) hands messages over directly;
   * `router` goes through Connect's in-memory router transport, a full protocol round trip
   * per call (serialization included), which costs hundreds of microseconds per call.
   */
  internalTransport?: "in-process" | "router";
}

/** A running embedded Tessera: every service in this process, HTTP on one port. */
export interface EmbeddedTessera {
  server: Server;
  /** http://host:port of the public port. */
  url: string;
  port: number;
  /** http://host:port of the operations port (TESSERA_OPS_PORT); undefined when there is none. */
  opsUrl: string | undefined;
  /** The key created on first start (printed once); undefined when keys existed or TESSERA_BOOTSTRAP_KEY is set. */
  createdKey: string | undefined;
  /** In-process clients of the services, the accounting admin RPCs included (never exposed on the port). */
  clients: {
    accounting: Client<typeof AccountingService>;
    registry: Client<typeof RegistryService>;
    decision: Client<typeof DecisionService>;
  };
  workers: WorkerDirectory;
  metrics: Metrics;
  /** Stops accepting, lets in-flight requests finish (then cancels them), closes the stores. */
  close(): Promise<void>;
}

/**
 * Starts every service in one process (what `tessera serve` runs without arguments):
 * accounting on the LMDB store in TESSERA_DATA_DIR, the registry from the models config,
 * the inference pool on every model directory that exists, decisions, and the gateway.
 * The services call each other through typed Connect clients over an in-process transport.
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedTessera> {
  const { config, logger } = options;
  const metrics = options.metrics ?? createMetrics();
  const catalog = loadCatalog(config.modelsConfig);
  const workers = options.workers ?? createInProcessWorkerDirectory();
  const cleanups: (() => Promise<void> | void)[] = [];
  const transportOf = <T extends DescService>(service: T, impl: ServiceImpl<T>): Transport =>
    options.internalTransport === "router"
      ? createRouterTransport((router) => router.service(service, impl))
      : createInProcessTransport((services) => services.service(service, impl));
  const cleanup = async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (err) {
        logger.error({ err }, "shutdown step failed");
      }
    }
  };

  try {
    const accounting = await openEmbeddedAccounting({
      dataDir: config.dataDir,
      logger: logger.child({ service: "accounting" }),
      defaultRequestsPerMinute: config.defaultRequestsPerMinute,
      recover: true,
    });
    cleanups.push(() => accounting.close());
    const accountingClient = createClient(AccountingService, transportOf(AccountingService, accounting.service));

    const registryService = createRegistryService({ catalog, workers });
    const registryClient = createClient(RegistryService, transportOf(RegistryService, registryService));

    // Inference: every model directory of the catalog that exists, in one pool.
    const served = servedModels(catalog, logger);
    let inferenceTransport: Transport | undefined;
    let inferenceService: ServiceImpl<typeof InferenceService> | undefined;
    let modelsLoaded = false;
    if (served.length > 0) {
      const { pool, service } = await startInferenceWorker(served, config, logger, metrics);
      cleanups.push(() => pool.close());
      inferenceService = service;
      inferenceTransport = transportOf(InferenceService, service);
      const beats = startHeartbeats(workers, () => ({
        id: config.workerId,
        address: "",
        models: [...pool.servingIds],
        slotsTotal: pool.slotsTotal,
        slotsFree: pool.slotsFree(),
      }));
      modelsLoaded = true;
      cleanups.push(() => beats.stop());
      logger.info({ models: served, slots: config.slots }, "inference pool loaded");
    }

    const inferenceFor = createInferenceRouter({
      workers,
      transportFor: (worker) => {
        if (worker.id === config.workerId && inferenceTransport !== undefined) return inferenceTransport;
        if (worker.address === "") throw new ConnectError(`inference worker ${worker.id} announced no address`, Code.Unavailable);
        return createConnectTransport({ baseUrl: worker.address, httpVersion: "2" });
      },
    });

    const decisionService = createDecisionService({
      registry: registryClient,
      inferenceFor,
      logger: logger.child({ service: "decision" }),
    });
    const decisionClient = createClient(DecisionService, transportOf(DecisionService, decisionService));

    const createdKey = await ensureFirstKey({
      accounting: accountingClient,
      bootstrapKey: config.bootstrapKey,
      out: options.out ?? process.stdout,
      logger,
    });

    // A key nobody can hold: authenticating it proves the store was read.
    const probeKey = `tsr_readiness_${randomBytes(24).toString("base64url")}`;
    const readiness: ReadinessCheck[] = [
      {
        name: "models",
        check: () => (!modelsLoaded ? `no model loaded: none of the model directories of ${config.modelsConfig} exists` : true),
      },
      {
        name: "store",
        check: async () => {
          try {
            await accountingClient.authenticate({ apiKey: probeKey });
            return true;
          } catch (err) {
            return err instanceof ConnectError && err.code === Code.Unauthenticated ? true : `accounting store: ${(err as Error).message}`;
          }
        },
      },
    ];

    const gate = createGate({ accounting: accountingClient, logger });
    const handler = createGatewayHandler({
      routes: createRoutes({
        maxDecisionWorkTokens: config.maxDecisionWorkTokens,
        registry: registryClient,
        decision: decisionClient,
        inferenceFor,
        metrics,
        readiness,
        streamStallTimeoutMs: config.streamStallTimeoutMs,
        playground: config.playground,
      }),
      gate,
      logger,
      metrics,
      maxUrlBytes: config.maxUrlBytes,
      cors: createCors(config.corsOrigins),
      deadlineMs: config.requestDeadlineMs,
      connect: createConnectMount({
        routes: (router) => {
          router.service(RegistryService, registryService);
          router.service(DecisionService, decisionService);
          if (inferenceService !== undefined) router.service(InferenceService, inferenceService);
        },
        gate,
      }),
    });
    const { server, port, url } = await listenGateway(handler, config, metrics, logger);
    const ops = await listenOps(handler, config, logger);
    logger.info({ url, opsUrl: ops?.url, dataDir: config.dataDir, modelsConfig: config.modelsConfig }, "tessera listening");

    let closing: Promise<void> | undefined;
    return {
      server,
      url,
      port,
      opsUrl: ops?.url,
      createdKey,
      clients: { accounting: accountingClient, registry: registryClient, decision: decisionClient },
      workers,
      metrics,
      close: () =>
        (closing ??= (async () => {
          logger.info("shutting down: no new connections, finishing requests in flight");
          // The worker stays announced until the requests in flight are done (cleanup withdraws it).
          await Promise.all([drain(server, config.shutdownTimeoutMs, logger), ops && drain(ops.server, config.shutdownTimeoutMs, logger)]);
          // Handlers answered 504 past their deadline may still be finishing (and settling).
          await handler.flush();
          await handler.close();
          await cleanup();
          logger.info("shut down");
        })()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
