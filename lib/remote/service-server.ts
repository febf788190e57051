import { createServer as createHttp1Server, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttp2Server, type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { checkReadiness, type ReadinessCheck } from "../readiness.js";

export interface ServiceServerOptions {
  host: string;
  port: number;
  /** The Connect services of this process. */
  routes: (router: ConnectRouter) => void;
  interceptors?: Interceptor[];
  readiness: readonly ReadinessCheck[];
  metrics: Metrics;
  logger: Logger;
}

export interface ServiceServer {
  /** http://host:port as this process reaches itself. */
  url: string;
  port: number;
  /** Stops accepting; calls in flight get `graceMs` to finish, then their connections are cut. */
  close(graceMs: number): Promise<void>;
}

type Request = Http2ServerRequest | IncomingMessage;
type Response = Http2ServerResponse | ServerResponse;

/** What an HTTP/2 client sends first (RFC 9113 3.4); no HTTP/1 request starts with "PRI ". */
const H2_PREFACE_START = Buffer.from("PRI ");

/**
 * The port of a process that serves internal services (accounting, registry, inference,
 * decision in distributed mode): Connect, gRPC and gRPC-Web over HTTP/2 without TLS (h2c,
 * what the internal clients speak) and HTTP/1.1 (probes, curl), plus `/healthz`,
 * `/readyz` and `/metrics`. Node's h2c server takes no HTTP/1.1, so each connection's first
 * bytes decide which of the two servers gets it.
 */
export async function startServiceServer(options: ServiceServerOptions): Promise<ServiceServer> {
  const { metrics, logger } = options;
  const rpcPaths = new Set<string>();
  const adapter = connectNodeAdapter({
    routes: (router) => {
      options.routes(router);
      for (const handler of router.handlers) rpcPaths.add(handler.requestPath);
    },
    ...(options.interceptors !== undefined && { interceptors: options.interceptors }),
    fallback: (_req, res) =>
      json(res as unknown as Response, 404, { detail: { error_type: "not_found_error", message: "no such service method" } }),
  });

  // HTTP/1.1 connections (probes, scrapes) and whether a request is running on them, so
  // that shutting down closes the idle ones at once, as node:http's closeIdleConnections does.
  const http1 = new Map<Socket, number>();
  let stopping = false;

  const handler = (req: Request, res: Response) => {
    const started = performance.now();
    if (req.httpVersionMajor === 1) {
      const socket = req.socket as Socket;
      http1.set(socket, (http1.get(socket) ?? 0) + 1);
      res.once("finish", () => {
        const busy = (http1.get(socket) ?? 1) - 1;
        http1.set(socket, busy);
        if (stopping && busy === 0) socket.end();
      });
    }
    const url = req.url ?? "/";
    const path = url.split("?", 1)[0]!;
    const method = req.method ?? "GET";
    const route = rpcPaths.has(path) ? path : ["/healthz", "/readyz", "/metrics"].includes(path) ? path : "unmatched";
    res.once("close", () => {
      const status = res.writableFinished ? res.statusCode : 499;
      const seconds = (performance.now() - started) / 1000;
      const labels = { method, route, status: String(status) };
      metrics.httpRequests.labels(labels).inc();
      metrics.httpDuration.labels(labels).observe(seconds);
      const level = status >= 500 ? "warn" : "debug";
      if (logger.isLevelEnabled(level)) logger[level]({ method, route, status, latencyMs: Math.round(seconds * 1e5) / 100 }, "request");
    });

    if (route === "/healthz" && (method === "GET" || method === "HEAD")) return json(res, 200, { status: "ok" });
    if (route === "/readyz" && (method === "GET" || method === "HEAD")) {
      checkReadiness(options.readiness).then(
        ({ status, body }) => json(res, status, body),
        (err: unknown) => json(res, 503, { status: "not ready", error: (err as Error).message }),
      );
      return;
    }
    if (route === "/metrics" && (method === "GET" || method === "HEAD")) {
      metrics.render().then(
        (text) => {
          res.writeHead(200, { "content-type": metrics.contentType, "content-length": Buffer.byteLength(text) });
          res.end(text);
        },
        (err: unknown) => json(res, 500, { detail: { error_type: "api_error", message: (err as Error).message } }),
      );
      return;
    }
    adapter(req as IncomingMessage, res as ServerResponse);
  };

  const h1 = createHttp1Server({ keepAliveTimeout: 65_000 }, handler);
  const h2 = createHttp2Server({}, handler);
  const sockets = new Set<Socket>();
  const sessions = new Set<Http2Session>();
  h2.on("session", (session: Http2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      http1.delete(socket);
    });
    socket.once("error", () => socket.destroy());
    socket.once("data", (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first.subarray(0, H2_PREFACE_START.length).equals(H2_PREFACE_START)) {
        // The HTTP/2 session reads what is buffered, then takes the socket's handle over
        // natively; resuming the JS stream here would steal its bytes.
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host === "0.0.0.0" || options.host === "::" ? "127.0.0.1" : options.host;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    close: (graceMs) =>
      (closing ??= (async () => {
        stopping = true;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // GOAWAY: clients open no new streams here; the streams in flight finish.
        for (const session of sessions) session.close();
        for (const [socket, busy] of http1) if (busy === 0) socket.end();
        let timer: NodeJS.Timeout | undefined;
        const expired = new Promise<"expired">((resolve) => {
          timer = setTimeout(() => resolve("expired"), graceMs);
        });
        if ((await Promise.race([closed, expired])) === "expired") {
          logger.warn({ graceMs }, "calls still running after the grace period; cutting them off");
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
          await closed;
        }
        clearTimeout(timer);
      })()),
  };
}

function json(res: Response, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
