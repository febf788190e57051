import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import {
  AccountingService,
  UsageKind,
  UsageSchema,
  type AdmitResponse,
  type Principal,
} from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import { ClientGone, MAX_BODY_BYTES, checkBodyHeaders, parseJson, readBody } from "./body.js";
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
}

export const REQUEST_ID_HEADER = "x-service-request-id";

/** After an oversized body is refused, how much more of it is read and thrown away before the connection is cut. */
const DISCARD_BYTES = 16 * 1024 * 1024;
const DISCARD_MS = 2_000;

export function newRequestId(): string {
  return `req_${randomUUID().replaceAll("-", "")}`;
}

/** Error style of a path no route claims: chat paths answer like OpenAI, the rest like System One. */
function styleOfPath(path: string): ErrorStyle {
  return path.startsWith("/v1/chat/") ? "openai" : "detail";
}

const BEARER = /^\s*Bearer\s+(\S+)\s*$/i;

/** The Bearer secret, or undefined when no key was sent. */
export function bearerKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
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

/**
 * One request's state and what its handler may do (RequestContext). A class rather than an
 * object literal: one is made per request.
 */
class HttpRequestContext implements RequestContext {
  readonly log: RequestLogFields = {};
  body: unknown = undefined;
  principal: Principal | undefined = undefined;
  routeName = "unmatched";
  /** An admission that reserved quota is always settled, with zero usage if the handler did not. */
  pendingSettle: UsageKind | undefined = undefined;
  /** The client went away before the answer was complete. */
  gone = false;
  private controller: AbortController | undefined = undefined;

  constructor(
    readonly requestId: string,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly logger: Logger,
    private readonly accounting: AccountingGate,
  ) {}

  /** Made on first use: most requests never need one (in-process calls are too short for a disconnect to matter). */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.gone) this.controller.abort(new ClientGone());
    }
    return this.controller.signal;
  }

  clientGone(): void {
    this.gone = true;
    this.controller?.abort(new ClientGone());
  }

  async admit(kind: UsageKind, reserveTokens: number): Promise<AdmitResponse> {
    if (this.principal === undefined) throw new Error("admit before authentication");
    const admitted = await this.accounting.admit({
      keyId: this.principal.keyId,
      requestId: this.requestId,
      kind,
      reserveTokens: BigInt(Math.max(0, Math.ceil(reserveTokens))),
    });
    if (kind !== UsageKind.UNSPECIFIED) this.pendingSettle = kind;
    if (!this.res.headersSent) {
      this.res.setHeader("x-ratelimit-remaining-requests", String(admitted.remainingRequests));
      this.res.setHeader("x-ratelimit-reset-requests", `${admitted.resetSeconds}s`);
    }
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
}

/**
 * The request handler of the public HTTP port: request ids, routing (404/405), auth and
 * admission through accounting, body limits, error shapes, the per-request log line and
 * HTTP metrics. Routes are small modules (gateway/routes) listed in one table.
 */
export function createGatewayHandler(deps: GatewayDeps): NodeHandler {
  const { accounting, logger, metrics } = deps;
  const maxBody = deps.maxBodyBytes ?? MAX_BODY_BYTES;
  const table = new Map<string, Map<string, Route>>();
  for (const route of deps.routes) {
    let methods = table.get(route.path);
    if (methods === undefined) table.set(route.path, (methods = new Map()));
    if (methods.has(route.method)) throw new Error(`two routes for ${route.method} ${route.path}`);
    methods.set(route.method, route);
    if (route.method === "GET") methods.set("HEAD", route);
  }

  // Bound metric children per (method, route, status): label lookups cost more than the observation.
  type Series = { requests: ReturnType<Metrics["httpRequests"]["labels"]>; duration: ReturnType<Metrics["httpDuration"]["labels"]> };
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

  const principals: PrincipalCache = createPrincipalCache();

  /** Auth, admission and body, in that order; then the route's handler. */
  async function run(route: Route, ctx: HttpRequestContext): Promise<JsonReply | undefined> {
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
    return route.handle(ctx);
  }

  async function authenticate(apiKey: string): Promise<Principal | undefined> {
    const { principal } = await accounting.authenticate({ apiKey });
    if (principal !== undefined) principals.set(apiKey, principal);
    return principal;
  }

  function fail(route: Route, ctx: HttpRequestContext, err: unknown): void {
    const { res } = ctx;
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
    replyError(res, route.errorStyle, httpError);
    discardBody(ctx.req, res);
  }

  async function serve(route: Route, ctx: HttpRequestContext): Promise<void> {
    let reply: JsonReply | undefined;
    try {
      reply = await run(route, ctx);
    } catch (err) {
      fail(route, ctx, err);
      return;
    } finally {
      if (ctx.pendingSettle !== undefined) {
        ctx.settle(ctx.pendingSettle, {}).catch((err: unknown) => logger.error({ reqId: ctx.requestId, err }, "settling failed"));
      }
    }
    const { res } = ctx;
    if (reply === undefined || res.headersSent) {
      if (!res.writableEnded) res.end();
      return;
    }
    try {
      sendJson(res, reply.status ?? 200, reply.body, reply.headers, reply.json);
    } catch (err) {
      // A body JSON cannot express (a BigInt, a cycle) is a bug of the route: 500.
      fail(route, ctx, err);
      return;
    }
    discardBody(ctx.req, res);
  }

  return (req, res) => {
    const started = performance.now();
    const requestId = newRequestId();
    res.setHeader(REQUEST_ID_HEADER, requestId);
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const method = req.method ?? "GET";
    const ctx = new HttpRequestContext(requestId, req, res, logger, accounting);
    let level: "info" | "debug" = "info";

    res.once("close", () => {
      const finished = res.writableFinished;
      if (!finished) ctx.clientGone();
      const status = finished ? res.statusCode : 499;
      const seconds = (performance.now() - started) / 1000;
      const { requests, duration } = seriesOf(method, ctx.routeName, status);
      requests.inc();
      duration.observe(seconds);
      const connectKeyId = ctx.routeName === "connect" ? deps.connect?.takeKeyId?.(requestId) : undefined;
      if (!logger.isLevelEnabled(level)) return;
      logger[level](
        {
          reqId: requestId,
          keyId: ctx.principal?.keyId ?? connectKeyId,
          method,
          route: ctx.routeName,
          path: ctx.routeName === "unmatched" ? path.slice(0, 200) : undefined,
          status,
          latencyMs: Math.round(seconds * 1e5) / 100,
          ...ctx.log,
        },
        "request",
      );
    });

    if (deps.connect !== undefined && path.startsWith("/tessera.")) {
      ctx.routeName = "connect";
      ctx.log["rpc"] = path.slice(1, 200);
      deps.connect(req, res);
      return;
    }

    const methods = table.get(path);
    const route = methods?.get(method);
    if (route === undefined) {
      const style = methods === undefined ? styleOfPath(path) : [...methods.values()][0]!.errorStyle;
      const err =
        methods === undefined
          ? new HttpError(404, "not_found_error", `no route ${method} ${path.slice(0, 200)}`, { code: "not_found" })
          : new HttpError(405, "invalid_request_error", `method ${method} is not allowed on ${path}`, {
              code: "method_not_allowed",
              headers: { allow: [...new Set(methods.keys())].join(", ") },
            });
      if (methods !== undefined) ctx.routeName = path;
      replyError(res, style, err);
      discardBody(req, res);
      return;
    }
    ctx.routeName = route.path;
    level = route.logLevel ?? "info";
    void serve(route, ctx);
  };
}

function replyError(res: ServerResponse, style: ErrorStyle, err: HttpError): void {
  const { status, body } = errorBody(style, err);
  sendJson(res, status, body, err.options.headers);
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
}

/**
 * A node:http server around the handler. `Expect: 100-continue` requests whose declared
 * body is too large are refused with 413 before the client sends it.
 */
export function createGatewayServer(handler: NodeHandler, options: GatewayServerOptions = {}): Server {
  const maxBody = options.maxBodyBytes ?? MAX_BODY_BYTES;
  const server = createServer({ keepAliveTimeout: 65_000 }, handler);
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    const length = Number(req.headers["content-length"] ?? 0);
    if (!(length > maxBody)) res.writeContinue();
    handler(req, res);
  });
  return server;
}
