import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import { ClientGone, MAX_BODY_BYTES, checkBodyHeaders, readBody } from "./body.js";
import { createBodyParser, type BodyParser } from "./body-parser.js";
import { DEFAULT_DEADLINE_MS, DeadlineExpired, DeadlineQueue } from "./deadlines.js";
import { discardBody } from "./drain-body.js";
import { HttpError, errorBody, toHttpError, type ErrorStyle } from "./errors.js";
import type { Gate, GatedCall, GateResult } from "./gate.js";
import type { NodeHandler } from "./http-server.js";
import { type Cors, preflightRefusal } from "./cors.js";
import { createSeriesCache } from "./metric-series.js";
import { HttpRequestContext } from "./request-context.js";
import { newRequestId } from "./request-id.js";
import type { JsonReply, RequestLogFields, Route } from "./route.js";
import { createRouteTable, loggedPath, lookupPath, styleOfPath } from "./route-table.js";

/** Serves the Connect paths of the mounted services, their calls passing the gate as `call`. */
export type ConnectPaths = (req: IncomingMessage, res: ServerResponse, call: GatedCall) => void;

export interface GatewayDeps {
  routes: readonly Route[];
  /** Authentication, admission and settlement (gate.ts), shared with the Connect mount. */
  gate: Gate;
  logger: Logger;
  metrics: Metrics;
  /** Serves the Connect paths (`/tessera.<package>.<Service>/<Method>`) on the same port; unset answers them 404. */
  connect?: ConnectPaths;
  maxBodyBytes?: number;
  /** Longer request targets (path and query) are answered 414. Default 8 KiB. */
  maxUrlBytes?: number;
  /**
   * A request whose answer has not started this long after it was received (body included)
   * is answered 504 and its work is cancelled (its signal aborts). A stream that has started
   * is governed by its stall timeout instead. 0: no deadline. Default 10 min.
   */
  deadlineMs?: number;
  /** CORS for the configured origins (cors.ts); unset: none. */
  cors?: Cors;
  /** Parses JSON bodies, large ones off the event loop (body-parser.ts). Default: one of its own. */
  bodyParser?: BodyParser;
}

export const DEFAULT_MAX_URL_BYTES = 8 * 1024;

/**
 * The gateway's request handler. `flush` waits for handlers still running after the gateway
 * answered for them (past their deadline); call it on shutdown after the server has drained,
 * before closing the stores and clients they use.
 */
export type GatewayHandler = NodeHandler & { flush(): Promise<void>; close(): Promise<void> };

type RouteRun = (ctx: HttpRequestContext) => Promise<GateResult<JsonReply | undefined>>;

/**
 * The request handler of the public HTTP port: request ids, routing (404/405), the gate
 * (auth, admission, settlement: gate.ts) for routes and Connect calls alike, body limits,
 * error shapes, the per-request log line and HTTP metrics (one place for both, when the
 * response closes). Routes are small modules (gateway/routes) listed in one table.
 *
 * This runs for every request, so it keeps to one async function per request (`serve`, and
 * the gate's where the route is charged), one plain `close` listener, one `writeHead` with
 * every header, one timer for every deadline, and metric children bound once per route and status.
 */
export function createGatewayHandler(deps: GatewayDeps): GatewayHandler {
  const { logger, gate } = deps;
  const maxBody = deps.maxBodyBytes ?? MAX_BODY_BYTES;
  const maxUrl = deps.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
  const deadlineMs = deps.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const table = createRouteTable(deps.routes);
  const seriesOf = createSeriesCache(deps.metrics);
  const shared = { logger, gate, closed };
  const bodies = deps.bodyParser ?? createBodyParser();

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

  /** The route's body and handler, under the deadline once the request has been received. */
  const handled =
    (route: Route): RouteRun =>
    async (ctx) => {
      try {
        if (route.body === "json") {
          const refused = checkBodyHeaders(ctx.req, maxBody);
          if (refused !== undefined) throw refused;
          ctx.body = await bodies.parse(await readBody(ctx.req, maxBody), route.prepareBody);
        }
        // Receiving the request is bounded by the body timeout; from here on, by the deadline.
        deadlines?.add(ctx);
        return { stream: false, message: await route.handle(ctx) };
      } finally {
        deadlines?.delete(ctx);
      }
    };
  const runs = new Map<Route, RouteRun>();
  for (const methods of table.values()) {
    for (const { route } of methods.values()) {
      if (!runs.has(route)) runs.set(route, route.charge === undefined ? handled(route) : gate.around(route.charge, handled(route)));
    }
  }

  /** When the response closes: metrics and the request's log line. */
  function closed(ctx: HttpRequestContext): void {
    const res = ctx.response;
    const finished = res.writableFinished;
    if (!finished) ctx.clientGone();
    const status = finished ? res.statusCode : 499;
    const seconds = (performance.now() - ctx.started) / 1000;
    const { requests, duration } = seriesOf(ctx.method, ctx.routeName, status, ctx.series);
    requests.inc();
    duration.observe(seconds);
    if (!logger.isLevelEnabled(ctx.level)) return;
    const keyId = ctx.principal?.keyId;
    const latencyMs = Math.round(seconds * 1e5) / 100;
    const line: RequestLogFields =
      ctx.routeName === "unmatched"
        ? { reqId: ctx.requestId, keyId, method: ctx.method, route: ctx.routeName, path: loggedPath(ctx.path), status, latencyMs }
        : { reqId: ctx.requestId, keyId, method: ctx.method, route: ctx.routeName, status, latencyMs };
    const added = ctx.addedLogFields;
    logger[ctx.level](added === undefined ? line : Object.assign(line, added), "request");
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
    // A request refused before it authenticated (no key, an unknown one, a throttled address)
    // has its body never read: the answer goes out and the connection closes after it, so a
    // client without a key cannot hold a socket by trickling a body.
    const closing =
      ctx.principal === undefined &&
      !ctx.req.complete &&
      (httpError.status === 401 || httpError.status === 403 || httpError.status === 429);
    if (closing) res.shouldKeepAlive = false;
    replyError(ctx, ctx.route?.errorStyle ?? styleOfPath(ctx.path), httpError);
    if (closing) {
      res.once("finish", () => ctx.req.socket.destroySoon());
      return;
    }
    discardBody(ctx.req, res);
  }

  /** The deadline passed before the answer started: answer 504 now and cancel the handler's work. */
  function expire(ctx: HttpRequestContext): void {
    const res = ctx.response;
    if (res.headersSent || res.writableEnded || ctx.gone || ctx.route === undefined) return;
    ctx.answered = true;
    ctx.log["deadlineExpired"] = true;
    // Its handler goes on until it sees the abort; shutdown waits for it (flush).
    const served = new Promise<void>((resolve) => {
      ctx.served = resolve;
    });
    late.add(served);
    void served.then(() => late.delete(served));
    const expired = new DeadlineExpired(deadlineMs);
    ctx.abort(expired);
    replyError(ctx, ctx.route.errorStyle, new HttpError(504, "api_error", expired.message, { code: "timeout" }));
    discardBody(ctx.req, res);
  }

  /**
   * A routed request from start to end: the gate (auth and admission), body and handler under
   * the deadline, the gate's settlement of what was reserved, then the answer.
   */
  async function serve(run: RouteRun, ctx: HttpRequestContext): Promise<void> {
    try {
      let reply: JsonReply | undefined;
      try {
        const result = await run(ctx);
        reply = result.stream ? undefined : result.message;
      } catch (err) {
        fail(ctx, err);
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

  /** Answers a request the gateway refuses before any route runs, then drains its body. */
  function refuse(ctx: HttpRequestContext, style: ErrorStyle, err: HttpError): void {
    replyError(ctx, style, err);
    discardBody(ctx.req, ctx.response);
  }

  const handle: NodeHandler = (req, res) => {
    const ctx = new HttpRequestContext(newRequestId(), req, res, shared);
    res.on("close", ctx.onClose);
    const path = ctx.path;
    const cors = deps.cors;
    if (cors !== undefined && req.headers.origin !== undefined) {
      const preflight = cors.preflight(req);
      if (preflight !== undefined) {
        ctx.routeName = "preflight";
        ctx.level = "debug";
        res.writeHead(204, preflight);
        res.end();
        discardBody(req, res);
        return;
      }
      ctx.extraHeaders = cors.responseHeaders(req);
    }

    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      // What node:http would answer itself (requireHostHeader), but in the JSON shape with a request id.
      const err = new HttpError(400, "invalid_request_error", "an HTTP/1.1 request must carry a Host header", { code: "missing_host" });
      refuse(ctx, styleOfPath(path), err);
      return;
    }
    if ((req.url ?? "/").length > maxUrl) {
      const err = new HttpError(414, "invalid_request_error", `the request target (path and query) is longer than ${maxUrl} bytes`, {
        code: "uri_too_long",
      });
      refuse(ctx, styleOfPath(path), err);
      return;
    }

    if (deps.connect !== undefined && path.startsWith("/tessera.")) {
      ctx.routeName = "connect";
      ctx.log["rpc"] = loggedPath(path.slice(1));
      ctx.exposeHeaders();
      deps.connect(req, res, ctx);
      return;
    }

    const methods = lookupPath(table, path);
    const entry = methods?.get(ctx.method);
    if (entry === undefined) {
      if (methods === undefined) {
        refuse(
          ctx,
          styleOfPath(path),
          new HttpError(404, "not_found_error", `no route ${ctx.method} ${path.slice(0, 200)}`, { code: "not_found" }),
        );
        return;
      }
      ctx.routeName = [...methods.values()][0]!.route.path;
      const preflight = ctx.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
      const err = new HttpError(
        405,
        "invalid_request_error",
        preflight ? preflightRefusal(req.headers.origin, cors !== undefined) : `method ${ctx.method} is not allowed on ${path}`,
        {
          code: preflight ? "cors_not_allowed" : "method_not_allowed",
          headers: { allow: [...new Set(methods.keys())].join(", ") },
        },
      );
      refuse(ctx, [...methods.values()][0]!.route.errorStyle, err);
      return;
    }
    const route = entry.route;
    ctx.route = route;
    ctx.routeName = route.path;
    ctx.series = entry.series;
    ctx.level = route.logLevel ?? "info";
    void serve(runs.get(route)!, ctx);
  };
  return Object.assign(handle, {
    flush: async () => {
      while (late.size > 0) await Promise.all([...late]);
    },
    close: () => bodies.close(),
  });
}

function replyError(ctx: HttpRequestContext, style: ErrorStyle, err: HttpError): void {
  const { status, body } = errorBody(style, err);
  ctx.send(status, JSON.stringify(body), err.options.headers);
}
