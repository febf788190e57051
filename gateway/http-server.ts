import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import { MAX_BODY_BYTES } from "./body.js";
import { errorBody, HttpError, sendError } from "./errors.js";
import { newRequestId, OPENAI_REQUEST_ID_HEADER, REQUEST_ID_HEADER } from "./request-id.js";

/** A node:http request handler (the gateway's, or the Connect paths'). */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface GatewayServerOptions {
  maxBodyBytes?: number;
  /** Time a client has to send a request's headers (slowloris). Default 10 s. */
  headersTimeoutMs?: number;
  /** Time a client has to send a whole request, body included (slow bodies). Default 60 s. */
  requestTimeoutMs?: number;
  /** Connections open at once; beyond it new ones are closed as they are accepted. Default 1024. */
  maxConnections?: number;
  /** Largest request line plus headers; larger is answered 431. Default 16 KiB. */
  maxHeaderBytes?: number;
  /** Idle time after which a keep-alive connection is closed. Default 65 s (longer than common load balancers' 60 s). */
  keepAliveTimeoutMs?: number;
  /** Counts connections refused and malformed or timed-out requests. */
  metrics?: Metrics;
  logger?: Logger;
}

export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_CONNECTIONS = 1024;
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024;

/** HTTP answers to requests node:http refused before any handler ran (parse errors, timeouts). */
const CLIENT_ERRORS: Readonly<Record<string, { status: number; reason: string; message: string; code: string }>> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: "Request Header Fields Too Large",
    message: "the request line and headers are larger than this server accepts",
    code: "headers_too_large",
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: {
    status: 413,
    reason: "Payload Too Large",
    message: "chunk extensions are too large",
    code: "request_too_large",
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: "Request Timeout",
    message: "the request was not received in time; the connection is closed",
    code: "request_timeout",
  },
};
const MALFORMED = { status: 400, reason: "Bad Request", message: "malformed HTTP request", code: "bad_request" };

/**
 * The answer to a request node:http could not parse or that timed out, in the System One
 * error shape with a request id, then the connection is closed. Nothing is written when a
 * response on that connection has already started (it would corrupt it).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): { status: number; code: string } | undefined {
  const known = CLIENT_ERRORS[err.code ?? ""] ?? MALFORMED;
  // node:http's own handler checks the same internal field before writing its canned answer.
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return undefined;
  }
  const body = JSON.stringify(
    errorBody("detail", new HttpError(known.status, "invalid_request_error", known.message, { code: known.code })).body,
  );
  socket.once("finish", () => socket.destroy());
  const id = newRequestId();
  socket.end(
    `HTTP/1.1 ${known.status} ${known.reason}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `${REQUEST_ID_HEADER}: ${id}\r\n${OPENAI_REQUEST_ID_HEADER}: ${id}\r\nconnection: close\r\n\r\n${body}`,
  );
  return { status: known.status, code: known.code };
}

/**
 * A node:http server around the handler, hardened against slow and hostile clients: header
 * and whole-request timeouts (408, then the connection is closed), a cap on open
 * connections, a header size limit (431), malformed requests answered 400 in JSON.
 * `Expect: 100-continue` requests whose declared body is too large are refused with 413
 * before the client sends it.
 */
export function createGatewayServer(handler: NodeHandler, options: GatewayServerOptions = {}): Server {
  const maxBody = options.maxBodyBytes ?? MAX_BODY_BYTES;
  const headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const requestTimeout = Math.max(options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, headersTimeout);
  const server = createServer(
    {
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 65_000,
      headersTimeout,
      requestTimeout,
      // How often node checks the two timeouts above (its default, 30 s, would let them overrun by that much).
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(headersTimeout / 4))),
      maxHeaderSize: options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES,
      // The handler refuses a missing Host itself, in the JSON shape.
      requireHostHeader: false,
    },
    handler,
  );
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const { metrics, logger } = options;
  const dropped = metrics?.counter({
    name: "tessera_http_connections_dropped_total",
    help: "Connections closed as they were accepted because the server had its maximum open (TESSERA_MAX_CONNECTIONS).",
  });
  const refused = metrics?.counter({
    name: "tessera_http_client_errors_total",
    help: "Requests node:http refused before routing: malformed (400), headers too large (431), too slow (408).",
    labelNames: ["status"],
  });
  server.on("drop", () => {
    dropped?.inc();
    logger?.debug({ maxConnections: server.maxConnections }, "connection refused: too many open connections");
  });
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    const answered = answerClientError(err, socket);
    if (answered !== undefined) {
      refused?.labels({ status: String(answered.status) }).inc();
      logger?.debug({ status: answered.status, code: answered.code, err: err.code }, "request refused before routing");
    }
  });
  // An Expect other than 100-continue: what node:http answers itself (417), in the JSON shape with a request id.
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    const id = newRequestId();
    res.setHeader(REQUEST_ID_HEADER, id);
    res.setHeader(OPENAI_REQUEST_ID_HEADER, id);
    res.shouldKeepAlive = false;
    sendError(
      res,
      "detail",
      new HttpError(417, "invalid_request_error", "only Expect: 100-continue is supported", { code: "expectation_failed" }),
    );
  });
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    const length = Number(req.headers["content-length"] ?? 0);
    if (!(length > maxBody)) res.writeContinue();
    handler(req, res);
  });
  return server;
}
