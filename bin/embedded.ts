import type { Server } from "node:http";
import type { Client } from "@connectrpc/connect";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import type { Config } from "../lib/config.js";
import { createInProcessWorkerDirectory } from "../lib/heartbeats/in-process.js";
import { startHeartbeats } from "../lib/heartbeats/publisher.js";
import type { WorkerDirectory } from "../lib/heartbeats/types.js";
import { createInferenceRouter, workerTransports } from "../lib/inference-router.js";
import type { Logger } from "../lib/logger.js";
import { createMetrics, type Metrics } from "../lib/metrics.js";
import type { ReadinessCheck } from "../lib/readiness.js";
import { type InternalTransport, localClient, localTransport, mountAll } from "../lib/service-mount.js";
import { openEmbeddedAccounting } from "../services/accounting/embedded.js";
import { accountingReadiness } from "../services/accounting/readiness.js";
import { decisionRoutes } from "../services/decision/server.js";
import type { Catalog } from "../services/registry/catalog.js";
import { registryRoutes } from "../services/registry/server.js";
import { ensureFirstKey } from "./bootstrap.js";
import { createCleanups } from "./cleanups.js";
import { servedModels, startInferenceWorker } from "./inference-worker.js";
import { LivePulledCatalog } from "./pulled-models-live.js";
import { startGateway } from "./start-gateway.js";

export interface EmbeddedOptions {
  config: Config;
  logger: Logger;
  /** Where the first-start key is printed (stdout by default). */
  out?: NodeJS.WritableStream;
  metrics?: Metrics;
  /** Replaces the in-process worker directory (tests announce workers of their own). */
  workers?: WorkerDirectory;
  /**
   * How the services call each other: `in-process` (default) or `router`, a full Connect
   * round trip per call, which costs hundreds of microseconds per call (lib/service-mount.ts).
   */
  internalTransport?: InternalTransport;
  /**
   * The catalog to serve (`serve --model`: the pulled models named); default: the models config
   * and every pulled model, models pulled while serving joining it (bin/pulled-models-live.ts).
   */
  catalog?: Catalog;
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
  const live = options.catalog === undefined ? new LivePulledCatalog(config.storage.modelsConfig, config.storage.dataDir) : undefined;
  const catalog = options.catalog ?? live!.catalog();
  const workers = options.workers ?? createInProcessWorkerDirectory();
  const internal = options.internalTransport ?? "in-process";
  const cleanups = createCleanups(logger);

  try {
    const accounting = await openEmbeddedAccounting({
      dataDir: config.storage.dataDir,
      logger: logger.child({ service: "accounting" }),
      defaultRequestsPerMinute: config.accounting.defaultRequestsPerMinute,
      recover: true,
    });
    cleanups.add("accounting", () => accounting.close());
    const accountingClient = localClient(AccountingService, accounting.routes, internal);

    const registryMount = registryRoutes(
      live === undefined ? { catalog, workers } : { catalog: live.catalog, workers, lookAgain: live.lookAgain },
    );
    const registry = localClient(RegistryService, registryMount, internal);

    // Inference: every model directory of the catalog that exists, in one pool.
    const served = servedModels(catalog, logger);
    const worker = served.length > 0 ? await startInferenceWorker(served, config, logger, metrics) : undefined;
    if (worker !== undefined) {
      const { pool } = worker;
      cleanups.add("model pool", () => pool.close());
      const beats = startHeartbeats(workers, () => ({
        id: config.cluster.workerId,
        address: "",
        models: [...pool.servingIds],
        slotsTotal: pool.slotsTotal,
        slotsFree: pool.slotsFree(),
      }));
      cleanups.add("heartbeats", () => beats.stop());
      if (live !== undefined) {
        live.follow(pool, beats.beat, logger.child({ service: "registry" }));
        cleanups.add("pulled models", () => live.stop());
      }
      logger.info({ models: served, slots: config.limits.slots }, "inference pool loaded");
    }
    const inferenceFor = createInferenceRouter({
      workers,
      transportFor: workerTransports(config.cluster.workerId, worker && localTransport(worker.routes, internal)),
    });

    const decisionMount = decisionRoutes({ registry, inferenceFor, logger: logger.child({ service: "decision" }) });
    const decision = localClient(DecisionService, decisionMount, internal);

    const createdKey = await ensureFirstKey({
      accounting: accountingClient,
      bootstrapKey: config.accounting.bootstrapKey,
      out: options.out ?? process.stdout,
      logger,
    });

    const readiness: ReadinessCheck[] = [
      {
        name: "models",
        check: () =>
          worker === undefined ? `no model loaded: none of the model directories of ${config.storage.modelsConfig} exists` : true,
      },
      accountingReadiness(accountingClient, { name: "store", label: "accounting store" }),
    ];

    const gateway = await startGateway({
      config,
      logger,
      metrics,
      accounting: accountingClient,
      registry,
      decision,
      inferenceFor,
      readiness,
      connect: mountAll(worker === undefined ? [registryMount, decisionMount] : [registryMount, decisionMount, worker.routes]),
    });
    // The worker stays announced until the requests in flight are done (the gateway closes first).
    cleanups.add("gateway", () => gateway.close());
    const { server, url, port, opsUrl } = gateway;
    logger.info({ url, opsUrl, dataDir: config.storage.dataDir, modelsConfig: config.storage.modelsConfig }, "tessera listening");

    let closing: Promise<void> | undefined;
    return {
      server,
      url,
      port,
      opsUrl,
      createdKey,
      clients: { accounting: accountingClient, registry, decision },
      workers,
      metrics,
      close: () =>
        (closing ??= (async () => {
          logger.info("shutting down: no new connections, finishing requests in flight");
          await cleanups.runAll();
          logger.info("shut down");
        })()),
    };
  } catch (err) {
    await cleanups.runAll();
    throw err;
  }
}
