// The gateway alone on a port of 127.0.0.1, with the routes and accounting a test gives it and
// its log lines collected: for tests of the request path without the services behind it.
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll } from "vitest";
import { type AccountingGate, createGate } from "../../gateway/gate.js";
import { createGatewayServer } from "../../gateway/http-server.js";
import { createGatewayHandler, type GatewayDeps } from "../../gateway/server.js";
import { createLogger } from "../../lib/logger.js";
import { createMetrics } from "../../lib/metrics.js";

export interface BareGateway {
  /** `http://127.0.0.1:PORT`, set once the suite's beforeAll has run. */
  readonly base: string;
  /** Every log line written so far. */
  readonly logs: string[];
}

/** Starts the gateway before the suite's tests and closes it after them. */
export function useBareGateway({
  accounting,
  ...deps
}: Omit<GatewayDeps, "logger" | "metrics" | "gate"> & { accounting: AccountingGate }): BareGateway {
  const logs: string[] = [];
  const logger = createLogger({
    level: "info",
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(...chunk.toString().split("\n").filter(Boolean));
        done();
      },
    }),
  });
  const server = createGatewayServer(
    createGatewayHandler({
      ...deps,
      gate: createGate({ accounting, logger }),
      logger,
      metrics: createMetrics({ processMetrics: false }),
    }),
  );
  const gateway = { base: "", logs };
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    gateway.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return gateway;
}
