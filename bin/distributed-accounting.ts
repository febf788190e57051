import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Config } from "../lib/config.js";
import type { Logger } from "../lib/logger.js";
import type { NatsLink } from "../lib/nats/connection.js";
import { createNatsStore } from "../lib/nats/kv-store.js";
import { gatewayInstances } from "../lib/heartbeats/gateway-instances.js";
import { ensureUsageStream, startUsageConsumer } from "../lib/nats/usage-stream.js";
import { localClient, type ServiceMount } from "../lib/service-mount.js";
import { openBuckets, SETTLED_RETENTION_MS } from "../services/accounting/records.js";
import { accountingRoutes } from "../services/accounting/server.js";
import { createGatewaySweep } from "../services/accounting/sweep.js";
import { ensureFirstKey } from "./bootstrap.js";

export interface DistributedAccounting {
  /** The accounting service's mount (services/accounting/server.ts). */
  routes: ServiceMount;
  /** An in-process client of it. */
  client: Client<typeof AccountingService>;
  close(): Promise<void>;
}

/**
 * Accounting on NATS: keys, accounts, quotas, the ledger and the per-minute windows in
 * JetStream KV (compare-and-set by revision), the usage consumer settling what gateways
 * publish, the periodic sweep of requests whose gateway died (services/accounting/sweep.ts),
 * and the bootstrap key.
 */
export async function startDistributedAccounting(config: Config, nats: NatsLink, logger: Logger): Promise<DistributedAccounting> {
  const store = createNatsStore(nats.nc, {
    replicas: config.cluster.natsReplicas,
    timeoutMs: config.cluster.natsTimeoutMs,
    connected: nats.connected,
  });
  const routes = accountingRoutes({
    store,
    logger,
    defaultRequestsPerMinute: config.accounting.defaultRequestsPerMinute,
  });
  const client = localClient(AccountingService, routes);
  await retryWhileStarting(
    () => ensureUsageStream(nats.nc, { replicas: config.cluster.natsReplicas, ackWaitMs: config.accounting.usageAckWaitMs }),
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
  if (config.accounting.bootstrapKey !== undefined) {
    await retryWhileStarting(
      () => ensureFirstKey({ accounting: client, bootstrapKey: config.accounting.bootstrapKey, out: process.stdout, logger }),
      logger,
      "bootstrap key",
    );
  } else {
    logger.info("no TESSERA_BOOTSTRAP_KEY: create keys with `tessera keys create` (TESSERA_ACCOUNTING_URL and TESSERA_ADMIN_TOKEN set)");
  }
  if (config.cluster.adminToken === undefined) {
    logger.warn("TESSERA_ADMIN_TOKEN is not set: accounting's admin RPCs (keys, limits, usage) are refused on its port");
  }
  const sweep = startSweeping(
    createGatewaySweep(openBuckets(store, SETTLED_RETENTION_MS), gatewayInstances(store), logger),
    config.accounting.gatewaySweepIntervalMs,
    logger,
  );
  return {
    routes,
    client,
    async close() {
      await sweep.stop();
      await consumer.stop();
      await store.close();
    },
  };
}

/** Runs `sweep` every interval, one pass at a time; a failed pass (NATS away) is logged and the next one tries again. */
function startSweeping(sweep: () => Promise<unknown>, intervalMs: number, logger: Logger) {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= sweep()
      .then(
        () => undefined,
        (err: unknown) => logger.warn({ err }, "sweep of dead gateways' requests failed; next pass retries"),
      )
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
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
