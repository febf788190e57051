import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { errorBody, HttpError } from "../gateway/errors.js";
import { createGatewayServer, type NodeHandler } from "../gateway/http-server.js";
import { newRequestId, REQUEST_ID_HEADER } from "../gateway/request-id.js";
import type { GatewayHandler } from "../gateway/server.js";
import type { Config } from "../lib/config.js";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";

/** `[::1]` for IPv6 literals, the host itself otherwise. */
export function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** The public HTTP server of a gateway, with the configured limits, listening. */
export async function listenGateway(
  handler: GatewayHandler,
  config: Pick<Config, "server" | "http">,
  metrics: Metrics,
  logger: Logger,
): Promise<{ server: Server; port: number; url: string }> {
  const { server: listener, http } = config;
  const server = createGatewayServer(listener.opsPort === undefined ? handler : withoutMetrics(handler), { ...http, metrics, logger });
  await listen(server, listener.port, listener.host);
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://${hostForUrl(listener.host)}:${port}` };
}

/** A path without its query string. */
const pathOf = (url: string) => {
  const query = url.indexOf("?");
  return query < 0 ? url : url.slice(0, query);
};

/** A 404 in the detail shape, answered by the listener itself. */
function notFound(req: Parameters<NodeHandler>[0], res: Parameters<NodeHandler>[1], message: string): void {
  const { status, body } = errorBody("detail", new HttpError(404, "not_found_error", message, { code: "not_found" }));
  res.writeHead(status, { "content-type": "application/json", [REQUEST_ID_HEADER]: newRequestId() });
  res.end(JSON.stringify(body));
  req.resume();
}

/**
 * The public port's handler when an operations port exists: `/metrics` (which needs no key) is
 * served there only, so the public port does not tell anyone who asks the server's load.
 */
function withoutMetrics(handler: NodeHandler): NodeHandler {
  return (req, res) => {
    if (pathOf(req.url ?? "/") !== "/metrics") return handler(req, res);
    notFound(req, res, "/metrics is served on the operations port only (TESSERA_OPS_PORT)");
  };
}

/** The paths the operations listener serves. */
const OPS_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/metrics"]);

/** The gateway's handler for the operations paths only; anything else is 404 in the detail shape. */
function opsOnly(handler: NodeHandler): NodeHandler {
  return (req, res) => {
    if (OPS_PATHS.has(pathOf(req.url ?? "/"))) return handler(req, res);
    notFound(req, res, "this port serves /healthz, /readyz and /metrics only");
  };
}

/**
 * The operations listener (TESSERA_OPS_PORT): `/healthz`, `/readyz` and `/metrics` of the same
 * gateway on a port of their own, with connection caps of their own, so probes and scrapes
 * never queue behind clients' connections (an address holding the public port's connections
 * cannot reach this one where only the cluster's probes are let in). Same host as the public
 * port. Its refusals are not counted in the public port's connection metrics.
 */
export async function listenOps(
  handler: GatewayHandler,
  config: Pick<Config, "server" | "http">,
  logger: Logger,
): Promise<{ server: Server; port: number; url: string } | undefined> {
  const { server: listener, http } = config;
  if (listener.opsPort === undefined) return undefined;
  // The public port's timeouts and size caps; its connection caps are not this port's.
  const server = createGatewayServer(opsOnly(handler), {
    headersTimeoutMs: http.headersTimeoutMs,
    requestTimeoutMs: http.requestTimeoutMs,
    firstByteTimeoutMs: http.firstByteTimeoutMs,
    maxHeaderBytes: http.maxHeaderBytes,
    maxHeaders: http.maxHeaders,
    logger,
  });
  await listen(server, listener.opsPort, listener.host);
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://${hostForUrl(listener.host)}:${port}` };
}

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * Stops accepting; idle keep-alive connections close at once, busy ones once their request
 * is answered; whatever is still running after the grace period is cut off (which aborts
 * its handlers through their signals).
 */
export async function drain(server: Server, graceMs: number, logger: Logger): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => resolve("expired"), graceMs);
  });
  try {
    if ((await Promise.race([closed, expired])) === "expired") {
      logger.warn({ graceMs }, "requests still running after the grace period; cancelling them");
      server.closeAllConnections();
      await closed;
    }
  } finally {
    clearInterval(sweep);
    clearTimeout(timer);
  }
}
