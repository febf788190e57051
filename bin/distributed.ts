import { hostname } from "node:os";
import { type Client, createClient } from "@connectrpc/connect";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { ConfigError, type Config } from "../lib/config.js";
import { gatewayInstances, startGatewayHeartbeat } from "../lib/heartbeats/gateway-instances.js";
import { startHeartbeats } from "../lib/heartbeats/publisher.js";
import { createInferenceRouter, workerTransports } from "../lib/inference-router.js";
import type { Logger } from "../lib/logger.js";
import { createMetrics, type Metrics } from "../lib/metrics.js";
import { connectNats, redactUrl } from "../lib/nats/connection.js";
import { createNatsStore } from "../lib/nats/kv-store.js";
import { natsUsageSink } from "../lib/nats/usage-stream.js";
import { createNatsWorkerDirectory } from "../lib/nats/worker-directory.js";
import type { ReadinessCheck } from "../lib/readiness.js";
import { bearerInterceptor, serviceTransport } from "../lib/remote/clients.js";
import { forwardingImpl } from "../lib/remote/forward.js";
import { startServiceServer } from "../lib/remote/service-server.js";
import { localClient, localTransport, mountAll, mountService, type ServiceMount } from "../lib/service-mount.js";
import { admittingAs, settleThroughSink } from "../lib/usage/gate.js";
import { retryingUsageSink } from "../lib/usage/retrying-sink.js";
import { accountingAuthInterceptor } from "../services/accounting/admin-auth.js";
import { accountingReadiness } from "../services/accounting/readiness.js";
import { decisionRoutes } from "../services/decision/server.js";
import type { loadCatalog } from "../services/registry/catalog.js";
import { servedCatalog } from "../services/registry/pulled.js";
import { registryRoutes } from "../services/registry/server.js";
import { createCleanups } from "./cleanups.js";
import { startDistributedAccounting } from "./distributed-accounting.js";
import { hostForUrl } from "./http-lifecycle.js";
import { servedModels, startInferenceWorker } from "./inference-worker.js";
import { startGateway } from "./start-gateway.js";

export const SERVICE_NAMES = ["gateway", "accounting", "registry", "inference", "decision"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface DistributedOptions {
  config: Config;
  logger: Logger;
  /** The services this process runs; the others are reached at their TESSERA_*_URL. */
  services: readonly ServiceName[];
  metrics?: Metrics;
}

/** One process of a distributed Tessera. */
export interface DistributedTessera {
  /** http://host:port of this process's port. */
  url: string;
  port: number;
  services: ServiceName[];
  /** The inference worker's announced address ("" when it is only used in this process). */
  advertisedUrl: string | undefined;
  metrics: Metrics;
  /** Withdraws the worker, stops accepting, lets calls in flight finish, flushes usage, closes NATS. */
  close(): Promise<void>;
}

/** Deadline of request-path calls to accounting and the registry. */
const CONTROL_CALL_TIMEOUT_MS = 5_000;
/** A usage event is retried this long at shutdown before it is logged as lost. */
const USAGE_FLUSH_MS = 5_000;

/** What is wrong with the settings for running these services, all at once. */
export function distributedConfigProblems(config: Config, services: readonly ServiceName[]): string[] {
  const has = (name: ServiceName) => services.includes(name);
  const problems: string[] = [];
  if (config.cluster.natsUrl === undefined) {
    problems.push(`TESSERA_NATS_URL: distributed mode (tessera serve ${services.join(" ")}) needs NATS, e.g. nats://127.0.0.1:4222`);
  }
  const need = (service: ServiceName, setting: string, urls: readonly string[], by: string) => {
    if (!has(service) && urls.length === 0 && !problems.some((p) => p.startsWith(`${setting}:`)))
      problems.push(`${setting}: the ${by} needs the ${service} service; run it in this process or give its Connect URL`);
  };
  if (has("gateway")) {
    need("accounting", "TESSERA_ACCOUNTING_URL", config.cluster.accountingUrls, "gateway");
    need("registry", "TESSERA_REGISTRY_URL", config.cluster.registryUrls, "gateway");
    need("decision", "TESSERA_DECISION_URL", config.cluster.decisionUrls, "gateway");
  }
  if (has("decision")) need("registry", "TESSERA_REGISTRY_URL", config.cluster.registryUrls, "decision service");
  return problems;
}

/**
 * Runs the named services in this process with the NATS adapters (docs/architecture.md §3): accounting
 * state in JetStream KV (rate windows included, so several replicas and gateways agree),
 * usage published by gateways to a JetStream stream that accounting consumes, inference
 * workers announced by heartbeats on NATS, and every request sent to the least-loaded live
 * worker over Connect. Services in the same process call each other in-process; the others
 * are reached at TESSERA_ACCOUNTING_URL, TESSERA_REGISTRY_URL and TESSERA_DECISION_URL.
 *
 * The port: a process with the gateway serves the public API there (REST, and the Connect
 * API of registry, decision and inference behind API keys); its other services are used by
 * that gateway only. A process without the gateway serves its services' Connect, gRPC and
 * gRPC-Web handlers (h2c and HTTP/1.1) for the other processes, accounting's guarded by
 * accountingAuthInterceptor. Every process answers /healthz, /readyz and /metrics.
 */
export async function startDistributed(options: DistributedOptions): Promise<DistributedTessera> {
  const { config, logger } = options;
  const services = SERVICE_NAMES.filter((name) => options.services.includes(name));
  const has = (name: ServiceName) => services.includes(name);
  const problems = distributedConfigProblems(config, services);
  if (problems.length > 0 || config.cluster.natsUrl === undefined) throw new ConfigError(problems);
  const natsUrl = config.cluster.natsUrl;

  const metrics = options.metrics ?? createMetrics();
  const catalog = once(() => servedCatalog(config.storage.modelsConfig, config.storage.dataDir));
  // A bad models config fails the start before anything connects.
  if (has("registry") || has("inference")) catalog();
  const cleanups = createCleanups(logger);

  try {
    const nats = await connectNats({ url: natsUrl, name: `tessera ${services.join("+")} ${config.cluster.workerId}`, logger });
    cleanups.add("nats", () => nats.close());
    const readiness: ReadinessCheck[] = [{ name: "nats", check: () => nats.connected() || "NATS is unreachable" }];
    const workers = once(() => {
      const directory = createNatsWorkerDirectory(nats.nc);
      cleanups.add("worker directory", () => directory.close());
      return directory;
    });
    // Heartbeats are heard from the start, so that the port opens with the live workers known.
    if (services.some((name) => name !== "accounting")) workers();
    // This process's services, mounted on its port; the others are reached at their URLs.
    const local: ServiceMount[] = [];

    // Accounting: state in JetStream KV, usage from the stream.
    const accounting = has("accounting")
      ? await startDistributedAccounting(config, nats, logger.child({ service: "accounting" }))
      : undefined;
    if (accounting !== undefined) {
      cleanups.add("accounting", () => accounting.close());
      local.push(accounting.routes);
      readiness.push(accountingReadiness(accounting.client, { name: "store", label: "accounting store" }));
    }

    // Registry: the catalog, listed while a live worker serves each model.
    const registryMount = has("registry") ? registryRoutes({ catalog: catalog(), workers: workers() }) : undefined;
    if (registryMount !== undefined) local.push(registryMount);
    const registry = once(() =>
      registryMount !== undefined
        ? localClient(RegistryService, registryMount)
        : createClient(RegistryService, serviceTransport(config.cluster.registryUrls, { timeoutMs: CONTROL_CALL_TIMEOUT_MS })),
    );

    // Inference: the model pool of this worker; announced once the port is known.
    const worker = has("inference") ? await startWorker(config, catalog(), logger, metrics) : undefined;
    if (worker !== undefined) {
      cleanups.add("model pool", () => worker.pool.close());
      local.push(worker.routes);
      readiness.push({ name: "models", check: () => true });
    }
    const inferenceFor = once(() =>
      createInferenceRouter({
        workers: workers(),
        transportFor: workerTransports(config.cluster.workerId, worker && localTransport(worker.routes)),
      }),
    );

    // Decision: validation and rendering here, the readout on a worker.
    const decisionMount = has("decision")
      ? decisionRoutes({ registry: registry(), inferenceFor: inferenceFor(), logger: logger.child({ service: "decision" }) })
      : undefined;
    if (decisionMount !== undefined) local.push(decisionMount);
    const decision = once(() =>
      decisionMount !== undefined
        ? localClient(DecisionService, decisionMount)
        : createClient(DecisionService, serviceTransport(config.cluster.decisionUrls)),
    );

    let server: { url: string; port: number; close(): Promise<void> };
    if (has("gateway")) {
      const usage = retryingUsageSink(natsUsageSink(nats.nc, { timeoutMs: config.cluster.natsTimeoutMs, connected: nats.connected }), {
        logger: logger.child({ component: "usage" }),
      });
      cleanups.add("usage flush", () => usage.flush(USAGE_FLUSH_MS));
      // Announced before the port opens: accounting's sweep takes a gateway without a heartbeat for dead.
      const heartbeatStore = createNatsStore(nats.nc, {
        replicas: config.cluster.natsReplicas,
        timeoutMs: config.cluster.natsTimeoutMs,
        connected: nats.connected,
      });
      const heartbeat = await startGatewayHeartbeat(gatewayInstances(heartbeatStore), logger.child({ component: "gateway heartbeat" }));
      cleanups.add("gateway heartbeat", () => heartbeat.stop());
      const accountingClient = accounting?.client ?? remoteAccounting(config);
      readiness.push(accountingReadiness(accountingClient, { name: "accounting", label: "accounting", timeoutMs: 2_000 }));
      const gateway = await startGateway({
        config,
        logger,
        metrics,
        accounting: admittingAs(settleThroughSink(accountingClient, usage), () => (heartbeat.announced() ? heartbeat.instance : undefined)),
        registry: registry(),
        decision: decision(),
        inferenceFor: inferenceFor(),
        readiness,
        connect: mountAll([
          registryMount ?? mountService(RegistryService, forwardingImpl(RegistryService, registry)),
          decisionMount ?? mountService(DecisionService, forwardingImpl(DecisionService, decision)),
          mountService(
            InferenceService,
            forwardingImpl(InferenceService, (req) => inferenceFor()((req as { model: string }).model)),
          ),
        ]),
      });
      if (gateway.opsUrl !== undefined) logger.info({ opsUrl: gateway.opsUrl }, "operations port listening");
      server = gateway;
    } else {
      const started = await startServiceServer({
        host: config.server.host,
        port: config.server.port,
        routes: mountAll(local),
        interceptors: has("accounting")
          ? [accountingAuthInterceptor({ adminToken: config.cluster.adminToken, internalToken: config.cluster.internalToken })]
          : [],
        readiness,
        metrics,
        logger,
      });
      server = { url: started.url, port: started.port, close: () => started.close(config.server.shutdownTimeoutMs) };
    }
    // Stopped first, so that nothing new arrives while the rest shuts down.
    cleanups.add("server", () => server.close());
    const { url, port } = server;

    // A worker inside a gateway's process is that gateway's alone: its port is the public API.
    const advertisedUrl =
      worker === undefined
        ? undefined
        : (config.cluster.advertiseUrl ?? (has("gateway") ? "" : `http://${advertisedHost(config.server.host)}:${port}`));
    if (worker !== undefined && advertisedUrl !== undefined) {
      const { pool } = worker;
      const beats = startHeartbeats(workers(), () => ({
        id: config.cluster.workerId,
        address: advertisedUrl,
        models: [...pool.servingIds],
        slotsTotal: pool.slotsTotal,
        slotsFree: pool.slotsFree(),
      }));
      cleanups.add("heartbeats", () => beats.stop());
    }

    logger.info(
      { url, services, advertisedUrl, nats: redactUrl(natsUrl), workerId: has("inference") ? config.cluster.workerId : undefined },
      "tessera listening",
    );

    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      services: [...services],
      advertisedUrl,
      metrics,
      close: () =>
        (closing ??= (async () => {
          logger.info({ services }, "shutting down: withdrawing, finishing calls in flight");
          // Withdraw the worker first (routers stop choosing it), then drain the port.
          await cleanups.runNow("heartbeats");
          await cleanups.runNow("server");
          await cleanups.runAll();
          logger.info("shut down");
        })()),
    };
  } catch (err) {
    await cleanups.runAll();
    throw err;
  }
}

/** The model pool of an inference worker; at least one of the catalog's model directories must exist. */
async function startWorker(config: Config, catalog: ReturnType<typeof loadCatalog>, logger: Logger, metrics: Metrics) {
  const served = servedModels(catalog, logger);
  if (served.length === 0) {
    throw new ConfigError([
      `TESSERA_MODELS_CONFIG: none of the model directories of ${config.storage.modelsConfig} exists; an inference worker needs at least one`,
    ]);
  }
  const worker = await startInferenceWorker(served, config, logger, metrics);
  logger.info({ models: served, slots: config.limits.slots }, "inference pool loaded");
  return worker;
}

/** The accounting service of other processes, for a gateway (its request-path calls, with the internal token). */
function remoteAccounting(config: Config): Client<typeof AccountingService> {
  const interceptors = config.cluster.internalToken === undefined ? [] : [bearerInterceptor(config.cluster.internalToken)];
  return createClient(
    AccountingService,
    serviceTransport(config.cluster.accountingUrls, { timeoutMs: CONTROL_CALL_TIMEOUT_MS, interceptors }),
  );
}

/** A value made on first use, then kept (what this process needs only for some of its services). */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}

/** The host part of the address a worker announces when TESSERA_ADVERTISE_URL is not set. */
function advertisedHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return hostname();
  return hostForUrl(host);
}
