import { randomFillSync } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import {
  type AccountingService,
  UsageKind,
  UsageSchema,
  type AdmitRequest,
  type AdmitResponse,
  type Principal,
} from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";
import type { CounterChild, HistogramChild, Metrics } from "../lib/metrics.js";
import { ClientGone, MAX_BODY_BYTES, checkBodyHeaders, parseJson, readBody } from "./body.js";
import { DeadlineQueue } from "./deadlines.js";
import { HttpError, errorBody, toHttpError, type ErrorStyle } from "./errors.js";
import { createPrincipalCache, type PrincipalCache } from "./principal-cache.js";
import type { JsonReply, RequestContext, RequestLogFields, Route, SettleUsage } from "./route.js";

/** The accounting calls of the request path (never the admin ones). */
export type AccountingGate = Pick<Client<typeof AccountingService>, "authenticate" | "admit" | "settle">;

/** A handler for the Connect paths (`/tessera.<package>.<Service>/<Method>`) on the same port. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface GatewayDeps {
  routes: readonly Route[];
  accounting: AccountingGate;
  logger: Logger;
  metrics: Metrics;
  /** Serves the Connect paths of the mounted services; unset answers them 404. */
  connect?: NodeHandler & { takeKeyId?: (requestId: string) => string | undefined };
  maxBodyBytes?: number;
  /** Longer request targets (path and query) are answered 414. Default 8 KiB. */
  maxUrlBytes?: number;
  /**
   * A request whose answer has not started this long after it was received (body included)
   * is answered 504 and its work is cancelled (its signal aborts). A stream that has started
   * is governed by its stall timeout instead. 0: no deadline. Default 10 min.
   */
  deadlineMs?: number;
}

export const DEFAULT_MAX_URL_BYTES = 8 * 1024;
export const DEFAULT_DEADLINE_MS = 600_000;

/** The request ran past the gateway's deadline before its answer started. */
export class DeadlineExpired extends Error {
  constructor(readonly deadlineMs: number) {
    super(`the request took longer than ${deadlineMs} ms before its answer started; its work was cancelled`);
    this.name = "DeadlineExpired";
  }
}

export const REQUEST_ID_HEADER = "x-service-request-id";
const RATE_REMAINING_HEADER = "x-ratelimit-remaining-requests";
const RATE_RESET_HEADER = "x-ratelimit-reset-requests";

/** After an oversized body is refused, how much more of it is read and thrown away before the connection is cut. */
const DISCARD_BYTES = 16 * 1024 * 1024;
const DISCARD_MS = 2_000;

/** Random bytes for request ids, drawn 256 ids at a time (a draw per id costs more than the rest of the id). */
const idBytes = Buffer.allocUnsafeSlow(4096);
let idOffset = idBytes.length;

/** `req_` and 128 random bits in hex. */
export function newRequestId(): string {
  if (idOffset === idBytes.length) {
    randomFillSync(idBytes);
    idOffset = 0;
  }
  const id = `req_${idBytes.toString("hex", idOffset, idOffset + 16)}`;
  idOffset += 16;
  return id;
}

/** Error style of a path no route claims: chat paths answer like OpenAI, the rest like System One. */
function styleOfPath(path: string): ErrorStyle {
  return path.startsWith("/v1/chat/") ? "openai" : "detail";
}

const BEARER = /^\s*Bearer\s+(\S+)\s*$/i;
const NO_SPACE = /^\S+$/;

const KEY_IN_PATH = /tsr_[^/?#]*/g;

/** A path as logged: at most 200 characters, and anything that looks like an API key (a client that put its key in the URL) redacted. */
function loggedPath(path: string): string {
  return (path.includes("tsr_") ? path.replace(KEY_IN_PATH, "tsr_[redacted]") : path).slice(0, 200);
}

/** The Bearer secret, or undefined when no key was sent. */
export function bearerKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  // The usual form, exactly `Bearer <key>`, without the general expression's match.
  if (header.startsWith("Bearer ")) {
    const key = header.slice(7);
    if (NO_SPACE.test(key)) return key;
  }
  return BEARER.exec(header)?.[1];
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>, json?: string): void {
  const text = json ?? JSON.stringify(body);
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function usageOf(usage: SettleUsage) {
  return create(UsageSchema, {
    promptTokens: BigInt(usage.promptTokens ?? 0),
    completionTokens: BigInt(usage.completionTokens ?? 0),
    inputTokens: BigInt(usage.inputTokens ?? 0),
  });
}

/** `x-ratelimit-reset-requests` values of a one-minute window, made once. */
const RESET_TEXTS = Array.from({ length: 61 }, (_, seconds) => `${seconds}s`);
const resetText = (seconds: number) => RESET_TEXTS[seconds] ?? `${seconds}s`;

function setRateHeaders(res: ServerResponse, admitted: AdmitResponse): void {
  res.setHeader(RATE_REMAINING_HEADER, String(admitted.remainingRequests));
  res.setHeader(RATE_RESET_HEADER, resetText(admitted.resetSeconds));
}

/** The request's metrics, bound once per (method, route, status). */
interface Series {
  requests: CounterChild;
  duration: HistogramChild;
}

/** A route as the table holds it, per method (GET and HEAD apart: the method is a metric label). */
interface RouteEntry {
  route: Route;
  /** The route's metric series by status. */
  series: Map<number, Series>;
}

/**
 * One request's state and what its handler may do (RequestContext). A class rather than an
 * object literal: one is made per request.
 *
 * The response headers the gateway adds (the request id, the rate limit's) are held back
 * and written with the status line in one `writeHead` when the gateway sends the answer
 * itself (cheaper than one `setHeader` each). A handler that writes the response itself
 * reaches it through `res`, which sets them first.
 */
class HttpRequestContext implements RequestContext {
  body: unknown = undefined;
  principal: Principal | undefined = undefined;
  routeName = "unmatched";
  route: Route | undefined = undefined;
  /** Metric series of the matched route by status. */
  series: Map<number, Series> | undefined = undefined;
  level: "info" | "debug" = "info";
  /** An admission that reserved quota is always settled, with zero usage if the handler did not. */
  pendingSettle: UsageKind | undefined = undefined;
  /** The client went away before the answer was complete. */
  gone = false;
  /** The gateway has answered on the handler's behalf (deadline): whatever it does later is dropped. */
  answered = false;
  /** When the deadline passes (performance.now() time); 0 until the request has been received. */
  deadlineAt = 0;
  /** Set when the gateway answered before the handler finished; called when it has. */
  served: (() => void) | undefined = undefined;
  /** The last admission's answer, for the rate-limit headers. */
  private admitted: AdmitResponse | undefined = undefined;
  /** Whether the held-back headers have been set on the response (a handler asked for it). */
  private exposed = false;
  private logFields: RequestLogFields | undefined = undefined;
  private controller: AbortController | undefined = undefined;
  private abortReason: Error | undefined = undefined;

  constructor(
    readonly requestId: string,
    readonly req: IncomingMessage,
    /** The response, without setting the held-back headers (the gateway's own use). */
    readonly response: ServerResponse,
    readonly logger: Logger,
    private readonly accounting: AccountingGate,
    readonly started: number,
    readonly method: string,
    readonly path: string,
    private readonly whenClosed: (ctx: HttpRequestContext) => void,
  ) {}

  /** The response's `close` listener. */
  readonly onClose = (): void => this.whenClosed(this);

  get res(): ServerResponse {
    if (!this.exposed) this.exposeHeaders();
    return this.response;
  }

  /** Sets the held-back headers on the response, for whoever writes it from here on. */
  exposeHeaders(): void {
    this.exposed = true;
    const res = this.response;
    if (res.headersSent) return;
    res.setHeader(REQUEST_ID_HEADER, this.requestId);
    if (this.admitted !== undefined) setRateHeaders(res, this.admitted);
  }

  /** Made on first use: most handlers add nothing to their line. */
  get log(): RequestLogFields {
    this.logFields ??= {};
    return this.logFields;
  }

  /** What handlers added to the log line, if anything. */
  get addedLogFields(): RequestLogFields | undefined {
    return this.logFields;
  }

  /** Made on first use: most requests never need one (in-process calls are too short for a disconnect to matter). */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  abort(reason: Error): void {
    this.abortReason ??= reason;
    this.controller?.abort(reason);
  }

  clientGone(): void {
    this.gone = true;
    this.abort(new ClientGone());
  }

  async admit(kind: UsageKind, reserveTokens: number): Promise<AdmitResponse> {
    if (this.principal === undefined) throw new Error("admit before authentication");
    // The message itself rather than an object for the client to pass through `create`.
    const request: AdmitRequest = {
      $typeName: "tessera.accounting.v1.AdmitRequest",
      keyId: this.principal.keyId,
      requestId: this.requestId,
      kind,
      reserveTokens: reserveTokens > 0 ? BigInt(Math.ceil(reserveTokens)) : 0n,
    };
    const admitted = await this.accounting.admit(request);
    if (kind !== UsageKind.UNSPECIFIED) this.pendingSettle = kind;
    if (!this.exposed) this.admitted = admitted;
    else if (!this.response.headersSent) setRateHeaders(this.response, admitted);
    return admitted;
  }

  async settle(kind: UsageKind, usage: SettleUsage): Promise<void> {
    if (this.principal === undefined) throw new Error("settle before authentication");
    if (usage.promptTokens !== undefined) this.log.promptTokens = usage.promptTokens;
    if (usage.completionTokens !== undefined) this.log.completionTokens = usage.completionTokens;
    if (usage.inputTokens !== undefined) this.log.inputTokens = usage.inputTokens;
    this.pendingSettle = undefined;
    // Never tied to the client's signal: what was used is charged even if the client left.
    await this.accounting.settle({ keyId: this.principal.keyId, requestId: this.requestId, kind, usage: usageOf(usage) });
  }

  /** Sends a whole JSON answer: the status line and every header in one `writeHead`, then the body (text or UTF-8 bytes). */
  send(status: number, body: string | Buffer, headers?: Record<string, string>): void {
    const admitted = this.admitted;
    const head: string[] = this.exposed
      ? []
      : admitted === undefined
        ? [REQUEST_ID_HEADER, this.requestId]
        : [
            REQUEST_ID_HEADER,
            this.requestId,
            RATE_REMAINING_HEADER,
            String(admitted.remainingRequests),
            RATE_RESET_HEADER,
            resetText(admitted.resetSeconds),
          ];
    if (headers !== undefined) {
      for (const name in headers) {
        const lower = name.toLowerCase();
        if (lower !== "content-type" && lower !== "content-length") head.push(name, headers[name]!);
      }
    }
    head.push(
      "content-type",
      "application/json",
      "content-length",
      String(typeof body === "string" ? Buffer.byteLength(body) : body.length),
    );
    this.response.writeHead(status, head);
    this.response.end(body);
  }
}

/**
 * The request handler of the public HTTP port: request ids, routing (404/405), auth and
 * admission through accounting, body limits, error shapes, the per-request log line and
 * HTTP metrics. Routes are small modules (gateway/routes) listed in one table.
 *
 * This runs for every request, so it keeps to one async function per request (`serve`, and
 * `admit` where the route is admitted), one plain `close` listener, one `writeHead` with every
 * header, one timer for every deadline, and metric children bound once per route and status.
 */
export function createGatewayHandler(deps: GatewayDeps): GatewayHandler {
  const { accounting, logger, metrics } = deps;
  const maxBody = deps.maxBodyBytes ?? MAX_BODY_BYTES;
  const maxUrl = deps.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
  const deadlineMs = deps.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const table = new Map<string, Map<string, RouteEntry>>();
  for (const route of deps.routes) {
    let methods = table.get(route.path);
    if (methods === undefined) {
      methods = new Map();
      table.set(route.path, methods);
    }
    if (methods.has(route.method)) throw new Error(`two routes for ${route.method} ${route.path}`);
    methods.set(route.method, { route, series: new Map() });
    if (route.method === "GET") methods.set("HEAD", { route, series: new Map() });
  }

  // Bound metric children per (method, route, status): label lookups cost more than the observation.
  const series = new Map<string, Series>();
  const seriesOf = (method: string, route: string, status: number): Series => {
    const key = `${method} ${route} ${status}`;
    let found = series.get(key);
    if (found === undefined) {
      const labels = { method, route, status: String(status) };
      found = { requests: metrics.httpRequests.labels(labels), duration: metrics.httpDuration.labels(labels) };
      if (series.size < 1000) series.set(key, found);
    }
    return found;
  };
  const seriesOfRequest = (ctx: HttpRequestContext, status: number): Series => {
    const byStatus = ctx.series;
    if (byStatus === undefined) return seriesOf(ctx.method, ctx.routeName, status);
    let found = byStatus.get(status);
    if (found === undefined) {
      found = seriesOf(ctx.method, ctx.routeName, status);
      if (byStatus.size < 100) byStatus.set(status, found);
    }
    return found;
  };

  const principals: PrincipalCache = createPrincipalCache();
  /** Handlers still running after the gateway answered for them (deadline); shutdown waits for them (flush). */
  const late = new Set<Promise<void>>();
  const deadlines =
    deadlineMs > 0
      ? new DeadlineQueue<HttpRequestContext>(
          deadlineMs,
          (ctx) => expire(ctx),
          (err) => logger.error({ err }, "answering a request past its deadline failed"),
        )
      : undefined;

  /** When the response closes: metrics and the request's log line. */
  function closed(ctx: HttpRequestContext): void {
    const res = ctx.response;
    const finished = res.writableFinished;
    if (!finished) ctx.clientGone();
    const status = finished ? res.statusCode : 499;
    const seconds = (performance.now() - ctx.started) / 1000;
    const { requests, duration } = seriesOfRequest(ctx, status);
    requests.inc();
    duration.observe(seconds);
    const connectKeyId = ctx.routeName === "connect" ? deps.connect?.takeKeyId?.(ctx.requestId) : undefined;
    if (!logger.isLevelEnabled(ctx.level)) return;
    const keyId = ctx.principal?.keyId ?? connectKeyId;
    const latencyMs = Math.round(seconds * 1e5) / 100;
    const line: RequestLogFields =
      ctx.routeName === "unmatched"
        ? { reqId: ctx.requestId, keyId, method: ctx.method, route: ctx.routeName, path: loggedPath(ctx.path), status, latencyMs }
        : { reqId: ctx.requestId, keyId, method: ctx.method, route: ctx.routeName, status, latencyMs };
    const added = ctx.addedLogFields;
    logger[ctx.level](added === undefined ? line : Object.assign(line, added), "request");
  }

  async function authenticate(apiKey: string): Promise<Principal | undefined> {
    const { principal } = await accounting.authenticate({ apiKey });
    if (principal !== undefined) principals.set(apiKey, principal);
    return principal;
  }

  function fail(ctx: HttpRequestContext, err: unknown): void {
    const res = ctx.response;
    if (ctx.answered) return;
    if (err instanceof ClientGone || ctx.gone) {
      if (!res.writableEnded) res.destroy();
      return;
    }
    const httpError = toHttpError(err);
    if (httpError.status >= 500 && httpError.status !== 503 && httpError.status !== 529) {
      logger.error({ reqId: ctx.requestId, err }, "request failed");
    }
    if (res.headersSent) {
      // A handler that streams owns its error events; all that is left is to end.
      res.end();
      return;
    }
    replyError(ctx, ctx.route?.errorStyle ?? styleOfPath(ctx.path), httpError);
    discardBody(ctx.req, res);
  }

  /** The deadline passed before the answer started: answer 504 now and cancel the handler's work. */
  function expire(ctx: HttpRequestContext): void {
    const res = ctx.response;
    if (res.headersSent || res.writableEnded || ctx.gone) return;
    ctx.answered = true;
    ctx.log["deadlineExpired"] = true;
    // Its handler goes on until it sees the abort; shutdown waits for it (flush).
    const served = new Promise<void>((resolve) => (ctx.served = resolve));
    late.add(served);
    void served.then(() => late.delete(served));
    const expired = new DeadlineExpired(deadlineMs);
    ctx.abort(expired);
    replyError(ctx, ctx.route!.errorStyle, new HttpError(504, "api_error", expired.message, { code: "timeout" }));
    discardBody(ctx.req, res);
  }

  /**
   * A routed request from start to end: auth, admission and body, in that order; the
   * route's handler under the deadline; settlement of what was reserved; the answer.
   */
  async function serve(route: Route, ctx: HttpRequestContext): Promise<void> {
    let reply: JsonReply | undefined;
    let failure: { err: unknown } | undefined;
    try {
      if (route.auth === "key") {
        const apiKey = bearerKey(ctx.req.headers.authorization);
        if (apiKey === undefined) {
          throw new HttpError(403, "authentication_error", "no API key sent; send the header Authorization: Bearer <key>", {
            code: "missing_api_key",
          });
        }
        if (route.admit !== undefined) {
          // Admit follows at once and checks the key and its account again: the cache is safe here.
          ctx.principal = principals.get(apiKey) ?? (await authenticate(apiKey));
          try {
            await ctx.admit(route.admit.kind, route.admit.reserveTokens);
          } catch (err) {
            if (err instanceof ConnectError && (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied)) {
              principals.delete(apiKey);
            }
            throw err;
          }
        } else {
          ctx.principal = await authenticate(apiKey);
        }
      }
      if (route.body === "json") {
        const refused = checkBodyHeaders(ctx.req, maxBody);
        if (refused !== undefined) throw refused;
        ctx.body = parseJson(await readBody(ctx.req, maxBody));
      }
      // Receiving the request is bounded by the body timeout; from here on, by the deadline.
      deadlines?.add(ctx);
      reply = await route.handle(ctx);
    } catch (err) {
      failure = { err };
    }
    try {
      deadlines?.delete(ctx);
      // An admission that reserved quota is settled (with zero usage if the handler did not)
      // before the answer goes out: a shutdown waits for answers, so the store is still open.
      if (ctx.pendingSettle !== undefined) {
        await ctx.settle(ctx.pendingSettle, {}).catch((err: unknown) => logger.error({ reqId: ctx.requestId, err }, "settling failed"));
      }
      if (failure !== undefined) {
        fail(ctx, failure.err);
        return;
      }
      const res = ctx.response;
      if (ctx.answered) return;
      if (reply === undefined || res.headersSent) {
        if (!res.writableEnded) res.end();
        return;
      }
      try {
        ctx.send(reply.status ?? 200, reply.bytes ?? reply.json ?? JSON.stringify(reply.body), reply.headers);
      } catch (err) {
        // A body JSON cannot express (a BigInt, a cycle) is a bug of the route: 500.
        fail(ctx, err);
        return;
      }
      discardBody(ctx.req, res);
    } finally {
      ctx.served?.();
    }
  }

  const handle: NodeHandler = (req, res) => {
    const started = performance.now();
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const ctx = new HttpRequestContext(newRequestId(), req, res, logger, accounting, started, req.method ?? "GET", path, closed);
    res.on("close", ctx.onClose);

    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      // What node:http would answer itself (requireHostHeader), but in the JSON shape with a request id.
      replyError(
        ctx,
        styleOfPath(path),
        new HttpError(400, "invalid_request_error", "an HTTP/1.1 request must carry a Host header", { code: "missing_host" }),
      );
      discardBody(req, res);
      return;
    }
    if (url.length > maxUrl) {
      replyError(
        ctx,
        styleOfPath(path),
        new HttpError(414, "invalid_request_error", `the request target (path and query) is longer than ${maxUrl} bytes`, {
          code: "uri_too_long",
        }),
      );
      discardBody(req, res);
      return;
    }

    if (deps.connect !== undefined && path.startsWith("/tessera.")) {
      ctx.routeName = "connect";
      ctx.log["rpc"] = loggedPath(path.slice(1));
      ctx.exposeHeaders();
      deps.connect(req, res);
      return;
    }

    const methods = table.get(path);
    const entry = methods?.get(ctx.method);
    if (entry === undefined) {
      const style = methods === undefined ? styleOfPath(path) : [...methods.values()][0]!.route.errorStyle;
      const err =
        methods === undefined
          ? new HttpError(404, "not_found_error", `no route ${ctx.method} ${path.slice(0, 200)}`, { code: "not_found" })
          : new HttpError(405, "invalid_request_error", `method ${ctx.method} is not allowed on ${path}`, {
              code: "method_not_allowed",
              headers: { allow: [...new Set(methods.keys())].join(", ") },
            });
      if (methods !== undefined) ctx.routeName = path;
      replyError(ctx, style, err);
      discardBody(req, res);
      return;
    }
    const route = entry.route;
    ctx.route = route;
    ctx.routeName = route.path;
    ctx.series = entry.series;
    ctx.level = route.logLevel ?? "info";
    void serve(route, ctx);
  };
  return Object.assign(handle, {
    flush: async () => {
      while (late.size > 0) await Promise.all([...late]);
    },
  });
}

/**
 * The gateway's request handler. `flush` waits for handlers still running after the gateway
 * answered for them (past their deadline); call it on shutdown after the server has drained,
 * before closing the stores and clients they use.
 */
export type GatewayHandler = NodeHandler & { flush(): Promise<void> };

function replyError(ctx: HttpRequestContext, style: ErrorStyle, err: HttpError): void {
  const { status, body } = errorBody(style, err);
  ctx.send(status, JSON.stringify(body), err.options.headers);
}

/**
 * A body left unread (refused before or while reading it) is read and thrown away so the
 * connection stays usable and the client receives the answer instead of a reset; a client
 * that keeps sending past a bound is cut off.
 */
function discardBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || req.readableEnded) return;
  let discarded = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, DISCARD_MS);
  timer.unref();
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_BYTES) {
      clearTimeout(timer);
      res.once("finish", cut);
      if (res.writableFinished) cut();
    }
  });
  req.once("end", () => clearTimeout(timer));
  req.once("close", () => clearTimeout(timer));
  req.resume();
}

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
  socket.end(
    `HTTP/1.1 ${known.status} ${known.reason}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `${REQUEST_ID_HEADER}: ${newRequestId()}\r\nconnection: close\r\n\r\n${body}`,
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
    res.setHeader(REQUEST_ID_HEADER, newRequestId());
    res.shouldKeepAlive = false;
    const { status, body } = errorBody(
      "detail",
      new HttpError(417, "invalid_request_error", "only Expect: 100-continue is supported", { code: "expectation_failed" }),
    );
    sendJson(res, status, body);
  });
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    const length = Number(req.headers["content-length"] ?? 0);
    if (!(length > maxBody)) res.writeContinue();
    handler(req, res);
  });
  return server;
}
