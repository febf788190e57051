import type { IncomingMessage, ServerResponse } from "node:http";
import type { AdmitResponse, Principal, UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";
import type { BodyPreparer } from "./body-prepare.js";
import type { ErrorStyle } from "./errors.js";
import type { Charge, SettleUsage } from "./gate.js";

/** What a route handler may add to its request's log line. */
export interface RequestLogFields {
  model?: string;
  promptTokens?: number;
  completionTokens?: number;
  inputTokens?: number;
  [field: string]: unknown;
}

/** Everything a handler gets for one request (`Body`: what its body was prepared into). */
export interface RequestContext<Body = unknown> {
  readonly requestId: string;
  readonly req: IncomingMessage;
  /**
   * For handlers that write the response themselves (SSE). The gateway's own headers (request
   * id, rate limit) are set on it when a handler first takes it; a handler that returns a
   * JsonReply never needs it.
   */
  readonly res: ServerResponse;
  /** Aborted when the client disconnects before the answer is complete. Pass it to every call. */
  readonly signal: AbortSignal;
  /** The authenticated key (routes with a `charge`). */
  readonly principal: Principal | undefined;
  /** The parsed JSON body (routes with `body: "json"`), prepared if the route names a `prepareBody`. */
  readonly body: Body;
  /** Fields for the request's log line (model, tokens). */
  readonly log: RequestLogFields;
  readonly logger: Logger;
  /**
   * Counts the request against the key's per-minute limit and reserves at most
   * `reserveTokens` of its quota. Throws (429) when refused. Routes whose charge holds a
   * number of tokens are already admitted when `handle` runs.
   */
  admit(kind: UsageKind, reserveTokens: number): Promise<AdmitResponse>;
  /** Charges the exact usage and releases the rest of the reservation (idempotent). */
  settle(kind: UsageKind, usage: SettleUsage): Promise<void>;
  /**
   * Records what the request has delivered so far (a stream's checkpoint: gate.ts), charged by
   * the store's recovery if the process dies before the request settles.
   */
  checkpoint(kind: UsageKind, usage: SettleUsage): void;
}

/** A JSON answer; a handler that writes the response itself (SSE) returns undefined. */
export interface JsonReply {
  status?: number;
  body: unknown;
  /** The body already serialized (sent as is instead of `body`), for answers a route reuses. */
  json?: string;
  /**
   * The body already serialized and encoded as UTF-8, sent as is (before `json` and `body`):
   * for an answer reused many times, nothing is left to do per request.
   */
  bytes?: Buffer;
  headers?: Record<string, string>;
}

/**
 * One HTTP route. The gateway does, in order: error style and request id; the gate (gate.ts)
 * when the route has a `charge`: Authorization header → accounting Authenticate → Admit
 * (unless the handler admits itself); `body: "json"` → content type, 8 MB limit while
 * streaming, JSON parse; then `handle`; then settlement of what was admitted and not settled.
 * `Body` is what `prepareBody` makes of the body (body-prepare.ts `PreparedBody`).
 */
export interface Route<Body = unknown> {
  method: "GET" | "POST";
  path: string;
  errorStyle: ErrorStyle;
  /** What a call costs (gate.ts); omit for a public route (no key: probes, metrics). */
  charge?: Charge<JsonReply | undefined>;
  body: "none" | "json";
  /**
   * What the body becomes besides parsed JSON (body-prepare.ts), on the thread that parses it:
   * `ctx.body` is then the preparer's result. Large bodies are parsed off the event loop.
   */
  prepareBody?: BodyPreparer;
  /** Log level of the request's line (probes and scrapes are `debug`). */
  logLevel?: "info" | "debug";
  handle(ctx: RequestContext<Body>): Promise<JsonReply | undefined> | JsonReply | undefined;
}
