import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import { MAX_BODY_BYTES } from "./body.js";
import { governConnections } from "./connection-governor.js";
import { errorBody, HttpError, sendError } from "./errors.js";
import { newRequestId, OPENAI_REQUEST_ID_HEADER, REQUEST_ID_HEADER, TYPESAFE_REQUEST_ID_HEADER } from "./request-id.js";

/** A node:http request handler (the gateway's, or the Connect paths'). */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface GatewayServerOptions {
  maxBodyBytes?: number;
  /** Time a client has to send a request's headers (slowloris). Default 10 s. */
  headersTimeoutMs?: number;
  /** Time a client has to send a whole request, body included (slow bodies). Default 60 s. */
  requestTimeoutMs?: number;
  /** Connections open at once; at the cap the oldest idle one is closed for a new one. Default 1024. */
  maxConnections?: number;
  /** Connections open at once from one client address (same rule). Default 256. */
  maxConnectionsPerAddress?: number;
  /** A connection that sends no byte this long is closed. Default 5 s; 0: never. */
  firstByteTimeoutMs?: number;
  /** Connections still sending headers or a body at once; past it the oldest is closed. Default 256. */
  maxReceivingConnections?: number;
  /** Largest request line plus headers (all header lines together); larger is answered 431. Default 16 KiB. */
  maxHeaderBytes?: number;
  /** Most header lines; more is answered 431. Default 100. */
  maxHeaders?: number;
  /** Idle time after which a keep-alive connection is closed. Default 65 s (longer than common load balancers' 60 s). */
  keepAliveTimeoutMs?: number;
  /** Counts connections refused and malformed or timed-out requests. */
  metrics?: Metrics;
  logger?: Logger;
}

export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_CONNECTIONS = 1024;
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;
export const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_RECEIVING_CONNECTIONS = 256;
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024;
export const DEFAULT_MAX_HEADERS = 100;

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
      `${REQUEST_ID_HEADER}: ${id}\r\n${OPENAI_REQUEST_ID_HEADER}: ${id}\r\n${TYPESAFE_REQUEST_ID_HEADER}: ${id}\r\nconnection: close\r\n\r\n${body}`,
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
  const maxHeaderBytes = options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  const maxHeaders = options.maxHeaders ?? DEFAULT_MAX_HEADERS;
  // node:http bounds the bytes it buffers per header field, not all of them together, and drops
  // fields past maxHeadersCount silently: both limits are checked here on the whole request.
  const guarded: NodeHandler = (req, res) => {
    const refusal = headersRefusal(req, maxHeaders, maxHeaderBytes);
    if (refusal === undefined) return handler(req, res);
    const id = newRequestId();
    res.setHeader(REQUEST_ID_HEADER, id);
    res.setHeader(OPENAI_REQUEST_ID_HEADER, id);
    res.setHeader(TYPESAFE_REQUEST_ID_HEADER, id);
    res.shouldKeepAlive = false;
    sendError(res, "detail", new HttpError(431, "invalid_request_error", refusal, { code: "headers_too_large" }));
    req.resume();
  };
  const server = createServer(
    {
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 65_000,
      headersTimeout,
      requestTimeout,
      // How often node checks the two timeouts above (its default, 30 s, would let them overrun by that much).
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(headersTimeout / 4))),
      maxHeaderSize: maxHeaderBytes,
      // The handler refuses a missing Host itself, in the JSON shape.
      requireHostHeader: false,
    },
    guarded,
  );
  // One more than the limit, so that a request over it is seen (node drops fields past this count).
  server.maxHeadersCount = maxHeaders + 1;
  const { metrics, logger } = options;
  const dropped = metrics?.counter({
    name: "tessera_http_connections_dropped_total",
    help: "New connections refused because the server (TESSERA_MAX_CONNECTIONS) or their address (TESSERA_MAX_CONNECTIONS_PER_ADDRESS) had its maximum open, all busy.",
  });
  const evicted = metrics?.counter({
    name: "tessera_http_connections_evicted_total",
    help: "Idle connections closed to make room for a new one at TESSERA_MAX_CONNECTIONS or TESSERA_MAX_CONNECTIONS_PER_ADDRESS.",
    labelNames: ["cap"],
  });
  const silent = metrics?.counter({
    name: "tessera_http_connections_silent_total",
    help: "Connections closed for sending no byte within TESSERA_FIRST_BYTE_TIMEOUT_MS.",
  });
  const receivingClosed = metrics?.counter({
    name: "tessera_http_connections_receiving_closed_total",
    help: "Connections closed while still sending headers or a body, the oldest first, past TESSERA_MAX_RECEIVING_CONNECTIONS.",
  });
  governConnections(
    server,
    {
      maxConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      maxPerAddress: options.maxConnectionsPerAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
      firstByteTimeoutMs: options.firstByteTimeoutMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS,
      maxReceiving: options.maxReceivingConnections ?? DEFAULT_MAX_RECEIVING_CONNECTIONS,
    },
    {
      evicted: (cap) => evicted?.labels({ cap }).inc(),
      refused: (cap) => {
        dropped?.inc();
        logger?.debug({ cap }, "connection refused: every open connection is busy");
      },
      silent: () => silent?.inc(),
      receiving: () => receivingClosed?.inc(),
    },
  );
  const refused = metrics?.counter({
    name: "tessera_http_client_errors_total",
    help: "Requests node:http refused before routing: malformed (400), headers too large (431), too slow (408).",
    labelNames: ["status"],
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
    res.setHeader(TYPESAFE_REQUEST_ID_HEADER, id);
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
    guarded(req, res);
  });
  return server;
}

/** Why a request's headers are refused (431), or undefined: too many lines, or too many bytes all together. */
function headersRefusal(req: IncomingMessage, maxHeaders: number, maxBytes: number): string | undefined {
  const raw = req.rawHeaders;
  if (raw.length / 2 > maxHeaders) return `a request may carry at most ${maxHeaders} header lines`;
  // The request line, then each "name: value\r\n".
  let bytes = (req.method?.length ?? 0) + (req.url?.length ?? 0) + 12;
  for (let i = 0; i < raw.length; i += 2) bytes += raw[i]!.length + raw[i + 1]!.length + 4;
  if (bytes > maxBytes) return `the request line and headers together are ${bytes} bytes; at most ${maxBytes} are accepted`;
  return undefined;
}
