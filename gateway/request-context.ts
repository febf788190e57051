import type { IncomingMessage, ServerResponse } from "node:http";
import type { AdmitResponse, Principal, UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";
import { ClientGone } from "./body.js";
import type { Gate, GatedCall, SettleUsage } from "./gate.js";
import type { MetricSeries } from "./metric-series.js";
import { OPENAI_REQUEST_ID_HEADER, REQUEST_ID_HEADER, TYPESAFE_REQUEST_ID_HEADER } from "./request-id.js";
import type { RequestContext, RequestLogFields, Route } from "./route.js";

const RATE_REMAINING_HEADER = "x-ratelimit-remaining-requests";
const RATE_RESET_HEADER = "x-ratelimit-reset-requests";

/** `x-ratelimit-reset-requests` values of a one-minute window, made once. */
const RESET_TEXTS = Array.from({ length: 61 }, (_, seconds) => `${seconds}s`);
const resetText = (seconds: number) => RESET_TEXTS[seconds] ?? `${seconds}s`;

function setRateHeaders(res: ServerResponse, admitted: AdmitResponse): void {
  res.setHeader(RATE_REMAINING_HEADER, String(admitted.remainingRequests));
  res.setHeader(RATE_RESET_HEADER, resetText(admitted.resetSeconds));
}

/** What every request context of one gateway shares. */
export interface ContextShared {
  readonly logger: Logger;
  readonly gate: Gate;
  /** The response's `close` listener's work (metrics, the log line). */
  readonly closed: (ctx: HttpRequestContext) => void;
}

/**
 * One request's state and what its handler may do (RequestContext); the gate's view of the
 * call (GatedCall) for routes and Connect calls alike. A class rather than an object
 * literal: one is made per request.
 *
 * The response headers the gateway adds (the request id, the rate limit's) are held back
 * and written with the status line in one `writeHead` when the gateway sends the answer
 * itself (cheaper than one `setHeader` each). A handler that writes the response itself
 * reaches it through `res`, which sets them first.
 */
export class HttpRequestContext implements RequestContext, GatedCall {
  body: unknown = undefined;
  principal: Principal | undefined = undefined;
  routeName = "unmatched";
  route: Route | undefined = undefined;
  /** Metric series of the matched route by status. */
  series: Map<number, MetricSeries> | undefined = undefined;
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
  /** Header pairs every answer of this request carries besides the ids (CORS, cors.ts). */
  extraHeaders: string[] = [];
  readonly started = performance.now();
  readonly method: string;
  readonly path: string;
  /** The last admission's answer, for the rate-limit headers. */
  private admission: AdmitResponse | undefined = undefined;
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
    private readonly shared: ContextShared,
  ) {
    this.method = req.method ?? "GET";
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    this.path = query < 0 ? url : url.slice(0, query);
  }

  /** The response's `close` listener. */
  readonly onClose = (): void => this.shared.closed(this);

  get logger(): Logger {
    return this.shared.logger;
  }

  get authorization(): string | undefined {
    return this.req.headers.authorization;
  }

  get remoteAddress(): string | undefined {
    return this.req.socket.remoteAddress;
  }

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
    res.setHeader(OPENAI_REQUEST_ID_HEADER, this.requestId);
    res.setHeader(TYPESAFE_REQUEST_ID_HEADER, this.requestId);
    for (let i = 0; i < this.extraHeaders.length; i += 2) res.setHeader(this.extraHeaders[i]!, this.extraHeaders[i + 1]!);
    if (this.admission !== undefined) setRateHeaders(res, this.admission);
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

  admitted(answer: AdmitResponse): void {
    if (!this.exposed) this.admission = answer;
    else if (!this.response.headersSent) setRateHeaders(this.response, answer);
  }

  admit(kind: UsageKind, reserveTokens: number): Promise<AdmitResponse> {
    return this.shared.gate.admit(this, kind, reserveTokens);
  }

  checkpoint(kind: UsageKind, usage: SettleUsage): void {
    this.shared.gate.checkpoint(this, kind, usage);
  }

  settle(kind: UsageKind, usage: SettleUsage): Promise<void> {
    if (usage.promptTokens !== undefined) this.log.promptTokens = usage.promptTokens;
    if (usage.completionTokens !== undefined) this.log.completionTokens = usage.completionTokens;
    if (usage.inputTokens !== undefined) this.log.inputTokens = usage.inputTokens;
    return this.shared.gate.settle(this, kind, usage);
  }

  /** Sends a whole JSON answer: the status line and every header in one `writeHead`, then the body (text or UTF-8 bytes). */
  send(status: number, body: string | Buffer, headers?: Record<string, string>): void {
    const admission = this.admission;
    const head: string[] = this.exposed
      ? []
      : [
          REQUEST_ID_HEADER,
          this.requestId,
          OPENAI_REQUEST_ID_HEADER,
          this.requestId,
          TYPESAFE_REQUEST_ID_HEADER,
          this.requestId,
          ...this.extraHeaders,
          ...(admission === undefined
            ? []
            : [RATE_REMAINING_HEADER, String(admission.remainingRequests), RATE_RESET_HEADER, resetText(admission.resetSeconds)]),
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
