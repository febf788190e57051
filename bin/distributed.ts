import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type ConnectRouter, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { createCors } from "../gateway/cors.js";
import { createConnectMount } from "../gateway/connect-mount.js";
import { createRoutes } from "../gateway/routes/index.js";
import { createGate } from "../gateway/gate.js";
import { createGatewayHandler } from "../gateway/server.js";
import { drain, hostForUrl, listenGateway, listenOps } from "./http-lifecycle.js";
import { ConfigError, type Config } from "../lib/config.js";
import { startHeartbeats } from "../lib/heartbeats/publisher.js";
import type { WorkerDirectory } from "../lib/heartbeats/types.js";
import { createInProcessTransport } from "../lib/in-process-transport.js";
import { createInferenceRouter, type InferenceFor } from "../lib/inference-router.js";
import type { Logger } from "../lib/logger.js";
import { createMetrics, type Metrics } from "../lib/metrics.js";
import { connectNats, redactUrl, type NatsLink } from "../lib/nats/connection.js";
import { createNatsStore } from "../lib/nats/kv-store.js";
import { ensureUsageStream, natsUsageSink, startUsageConsumer } from "../lib/nats/usage-stream.js";
import { createNatsWorkerDirectory } from "../lib/nats/worker-directory.js";
import { bearerInterceptor, connectTransport, serviceTransport } from "../lib/remote/clients.js";
import { forwardingImpl } from "../lib/remote/forward.js";
import { startServiceServer, type ReadinessProbe } from "../lib/remote/service-server.js";
import { settleThroughSink } from "../lib/usage/gate.js";
import { retryingUsageSink } from "../lib/usage/retrying-sink.js";
import { accountingAuthInterceptor } from "../services/accounting/admin-auth.js";
import { createAccountingService } from "../services/accounting/service.js";
import { createDecisionService } from "../services/decision/service.js";
import { loadCatalog } from "../services/registry/catalog.js";
import { createRegistryService } from "../services/registry/service.js";
import { ensureFirstKey } from "./bootstrap.js";
import { servedModels, startInferenceWorker } from "./inference-worker.js";
import type { ModelPool } from "../services/inference/model-pool.js";

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
  if (config.natsUrl === undefined) {
    problems.push(`TESSERA_NATS_URL: distributed mode (tessera serve ${services.join(" ")}) needs NATS, e.g. nats://127.0.0.1:4222`);
  }
  const need = (service: ServiceName, setting: string, urls: readonly string[], by: string) => {
    if (!has(service) && urls.length === 0 && !problems.some((p) => p.startsWith(`${setting}:`)))
      problems.push(`${setting}: the ${by} needs the ${service} service; run it in this process or give its Connect URL`);
  };
  if (has("gateway")) {
    need("accounting", "TESSERA_ACCOUNTING_URL", config.accountingUrls, "gateway");
    need("registry", "TESSERA_REGISTRY_URL", config.registryUrls, "gateway");
    need("decision", "TESSERA_DECISION_URL", config.decisionUrls, "gateway");
  }
  if (has("decision")) need("registry", "TESSERA_REGISTRY_URL", config.registryUrls, "decision service");
  return problems;
}

/**
 * Runs the named services in this process with the NATS adapters (DESIGN.md §3): accounting
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
  if (problems.length > 0) throw new ConfigError(problems);

  const metrics = options.metrics ?? createMetrics();
  const catalog = has("registry") || has("inference") ? loadCatalog(config.modelsConfig) : undefined;
  const cleanups: { name: string; run: () => Promise<void> | void }[] = [];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step.run();
      } catch (err) {
        logger.error({ err, step: step.name }, "shutdown step failed");
      }
    }
  };
  const inProcess = <T extends DescService>(service: T, impl: ServiceImpl<T>): Transport =>
    createInProcessTransport((registry) => registry.service(service, impl));

  try {
    const nats = await connectNats({ url: config.natsUrl!, name: `tessera ${services.join("+")} ${config.workerId}`, logger });
    cleanups.push({ name: "nats", run: () => nats.close() });
    const natsReady: ReadinessProbe = { name: "nats", check: () => nats.connected() || "NATS is unreachable" };
    const readiness: ReadinessProbe[] = [natsReady];

    let workers: WorkerDirectory | undefined;
    if (has("gateway") || has("registry") || has("decision") || has("inference")) {
      workers = createNatsWorkerDirectory(nats.nc);
      const directory = workers;
      cleanups.push({ name: "worker directory", run: () => directory.close() });
    }

    // Accounting: state in JetStream KV, usage from the stream.
    let accountingService: ServiceImpl<typeof AccountingService> | undefined;
    let accounting: Client<typeof AccountingService> | undefined;
    if (has("accounting")) {
      const started = await startAccounting(config, nats, logger.child({ service: "accounting" }));
      cleanups.push({ name: "accounting", run: started.close });
      accountingService = started.service;
      accounting = started.client;
      readiness.push({ name: "store", check: started.storeReady });
    } else if (has("gateway")) {
      const interceptors = config.internalToken === undefined ? [] : [bearerInterceptor(config.internalToken)];
      accounting = createClient(
        AccountingService,
        serviceTransport(config.accountingUrls, { timeoutMs: CONTROL_CALL_TIMEOUT_MS, interceptors }),
      );
    }

    // Registry: the catalog, listed while a live worker serves each model.
    let registryService: ServiceImpl<typeof RegistryService> | undefined;
    let registry: Client<typeof RegistryService> | undefined;
    if (has("registry")) {
      registryService = createRegistryService({ catalog: catalog!, workers: workers! });
      registry = createClient(RegistryService, inProcess(RegistryService, registryService));
    } else if (has("gateway") || has("decision")) {
      registry = createClient(RegistryService, serviceTransport(config.registryUrls, { timeoutMs: CONTROL_CALL_TIMEOUT_MS }));
    }

    // Inference: the model pool of this worker; announced once the port is known.
    let inferenceService: ServiceImpl<typeof InferenceService> | undefined;
    let inferenceTransport: Transport | undefined;
    let pool: ModelPool | undefined;
    if (has("inference")) {
      const served = servedModels(catalog!, logger);
      if (served.length === 0) {
        throw new ConfigError([
          `TESSERA_MODELS_CONFIG: none of the model directories of ${config.modelsConfig} exists; an inference worker needs at least one`,
        ]);
      }
      const worker = await startInferenceWorker(served, config, logger, metrics);
      pool = worker.pool;
      cleanups.push({ name: "model pool", run: () => worker.pool.close() });
      inferenceService = worker.service;
      inferenceTransport = inProcess(InferenceService, inferenceService);
      readiness.push({ name: "models", check: () => true });
      logger.info({ models: served, slots: config.slots }, "inference pool loaded");
    }

    let inferenceFor: InferenceFor | undefined;
    if (has("gateway") || has("decision")) {
      inferenceFor = createInferenceRouter({
        workers: workers!,
        transportFor: (worker) => {
          if (worker.id === config.workerId && inferenceTransport !== undefined) return inferenceTransport;
          if (worker.address === "") {
            throw new ConnectError(`inference worker ${worker.id} serves only the gateway of its own process`, Code.Unavailable);
          }
          return connectTransport(worker.address);
        },
      });
    }

    // Decision: validation and rendering here, the readout on a worker.
    let decisionService: ServiceImpl<typeof DecisionService> | undefined;
    let decision: Client<typeof DecisionService> | undefined;
    if (has("decision")) {
      decisionService = createDecisionService({
        registry: registry!,
        inferenceFor: inferenceFor!,
        logger: logger.child({ service: "decision" }),
      });
      decision = createClient(DecisionService, inProcess(DecisionService, decisionService));
    } else if (has("gateway")) {
      decision = createClient(DecisionService, serviceTransport(config.decisionUrls));
    }

    let url: string;
    let port: number;
    let closeServer: () => Promise<void>;
    if (has("gateway")) {
      const usage = retryingUsageSink(natsUsageSink(nats.nc, { timeoutMs: config.natsTimeoutMs, connected: nats.connected }), {
        logger: logger.child({ component: "usage" }),
      });
      cleanups.push({ name: "usage flush", run: () => usage.flush(USAGE_FLUSH_MS) });
      const gate = createGate({ accounting: settleThroughSink(accounting!, usage), logger });
      // A key nobody holds: Unauthenticated proves that accounting and its store answer.
      const probeKey = `tsr_readiness_${randomBytes(24).toString("base64url")}`;
      readiness.push({
        name: "accounting",
        check: async () => {
          try {
            await accounting!.authenticate({ apiKey: probeKey }, { timeoutMs: 2_000 });
            return true;
          } catch (err) {
            return err instanceof ConnectError && err.code === Code.Unauthenticated ? true : `accounting: ${(err as Error).message}`;
          }
        },
      });
      const handler = createGatewayHandler({
        routes: createRoutes({
          maxDecisionWorkTokens: config.maxDecisionWorkTokens,
          registry: registry!,
          decision: decision!,
          inferenceFor: inferenceFor!,
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
            router.service(RegistryService, registryService ?? forwardingImpl(RegistryService, () => registry!));
            router.service(DecisionService, decisionService ?? forwardingImpl(DecisionService, () => decision!));
            router.service(
              InferenceService,
              forwardingImpl(InferenceService, (req) => inferenceFor!((req as { model: string }).model)),
            );
          },
          gate,
        }),
      });
      const listening = await listenGateway(handler, config, metrics, logger);
      const server = listening.server;
      const ops = await listenOps(handler, config, logger);
      if (ops !== undefined) logger.info({ opsUrl: ops.url }, "operations port listening");
      port = listening.port;
      url = listening.url;
      closeServer = async () => {
        await Promise.all([drain(server, config.shutdownTimeoutMs, logger), ops && drain(ops.server, config.shutdownTimeoutMs, logger)]);
        // Handlers cut off by the deadline settle their usage before the stores close.
        await handler.flush();
        await handler.close();
      };
    } else {
      const server = await startServiceServer({
        host: config.host,
        port: config.port,
        routes: (router: ConnectRouter) => {
          if (accountingService !== undefined) router.service(AccountingService, accountingService);
          if (registryService !== undefined) router.service(RegistryService, registryService);
          if (inferenceService !== undefined) router.service(InferenceService, inferenceService);
          if (decisionService !== undefined) router.service(DecisionService, decisionService);
        },
        interceptors: has("accounting")
          ? [accountingAuthInterceptor({ adminToken: config.adminToken, internalToken: config.internalToken })]
          : [],
        readiness,
        metrics,
        logger,
      });
      url = server.url;
      port = server.port;
      closeServer = () => server.close(config.shutdownTimeoutMs);
    }
    // Stopped first, so that nothing new arrives while the rest shuts down.
    let serverClosed = false;
    cleanups.push({
      name: "server",
      run: async () => {
        if (!serverClosed) await closeServer();
      },
    });

    let advertisedUrl: string | undefined;
    if (pool !== undefined) {
      // A worker inside a gateway's process is that gateway's alone: its port is the public API.
      advertisedUrl = config.advertiseUrl ?? (has("gateway") ? "" : `http://${advertisedHost(config.host)}:${port}`);
      const loaded = pool;
      const address = advertisedUrl;
      const beats = startHeartbeats(workers!, () => ({
        id: config.workerId,
        address,
        models: [...loaded.servingIds],
        slotsTotal: loaded.slotsTotal,
        slotsFree: loaded.slotsFree(),
      }));
      cleanups.push({ name: "heartbeats", run: () => beats.stop() });
    }

    logger.info(
      { url, services, advertisedUrl, nats: redactUrl(config.natsUrl!), workerId: has("inference") ? config.workerId : undefined },
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
          const beats = cleanups.find((s) => s.name === "heartbeats");
          if (beats !== undefined) await beats.run();
          await closeServer();
          serverClosed = true;
          await cleanup();
          logger.info("shut down");
        })()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

interface StartedAccounting {
  service: ServiceImpl<typeof AccountingService>;
  client: Client<typeof AccountingService>;
  storeReady: () => Promise<true | string>;
  close(): Promise<void>;
}

/**
 * Accounting on NATS: keys, accounts, quotas, the ledger and the per-minute windows in
 * JetStream KV (compare-and-set by revision), the usage consumer settling what gateways
 * publish, and the bootstrap key.
 */
async function startAccounting(config: Config, nats: NatsLink, logger: Logger): Promise<StartedAccounting> {
  const store = createNatsStore(nats.nc, { replicas: config.natsReplicas, timeoutMs: config.natsTimeoutMs, connected: nats.connected });
  const service = createAccountingService({
    store,
    logger,
    defaultRequestsPerMinute: config.defaultRequestsPerMinute,
  });
  const client = createClient(
    AccountingService,
    createInProcessTransport((r) => r.service(AccountingService, service)),
  );
  await retryWhileStarting(
    () => ensureUsageStream(nats.nc, { replicas: config.natsReplicas, ackWaitMs: config.usageAckWaitMs }),
    logger,
    "usage stream",
  );
  const consumer = startUsageConsumer(
    nats.nc,
    async (event) => {
      try {
        await client.settle(event);
      } catch (err) {
        // An event that can never settle (its key does not exist, it is malformed) is logged and dropped, not redelivered forever.
        if (err instanceof ConnectError && (err.code === Code.NotFound || err.code === Code.InvalidArgument)) {
          logger.error(
            { err, keyId: event.keyId, requestId: event.requestId, usage: event.usage },
            "usage event cannot be settled; dropped",
          );
          return;
        }
        throw err;
      }
    },
    logger,
  );
  // Several replicas start at once and logs are collected: no key is generated and printed
  // here (unlike the embedded first start); TESSERA_BOOTSTRAP_KEY, when set, is made to exist.
  if (config.bootstrapKey !== undefined) {
    await retryWhileStarting(
      () => ensureFirstKey({ accounting: client, bootstrapKey: config.bootstrapKey, out: process.stdout, logger }),
      logger,
      "bootstrap key",
    );
  } else {
    logger.info("no TESSERA_BOOTSTRAP_KEY: create keys with `tessera keys create` (TESSERA_ACCOUNTING_URL and TESSERA_ADMIN_TOKEN set)");
  }
  if (config.adminToken === undefined) {
    logger.warn("TESSERA_ADMIN_TOKEN is not set: accounting's admin RPCs (keys, limits, usage) are refused on its port");
  }
  const probeKey = `tsr_readiness_${randomBytes(24).toString("base64url")}`;
  return {
    service,
    client,
    storeReady: async () => {
      try {
        await client.authenticate({ apiKey: probeKey });
        return true;
      } catch (err) {
        return err instanceof ConnectError && err.code === Code.Unauthenticated ? true : `accounting store: ${(err as Error).message}`;
      }
    },
    async close() {
      await consumer.stop();
      await store.close();
    },
  };
}

/** JetStream may still be starting when this process starts: try for up to a minute. */
async function retryWhileStarting<T>(work: () => Promise<T>, logger: Logger, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      logger.warn({ err, attempt }, `${what}: NATS not ready yet; retrying`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 200 * attempt)));
    }
  }
}

/** The host part of the address a worker announces when TESSERA_ADVERTISE_URL is not set. */
function advertisedHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return hostname();
  return hostForUrl(host);
}
