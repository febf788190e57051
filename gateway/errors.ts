import type { ServerResponse } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { QuotaExceededSchema, RateLimitedSchema } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { ValidationFailureSchema } from "../gen/tessera/decision/v1/decision_pb.js";
import { OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import { ERROR_PARAM_METADATA } from "../lib/error-param.js";
import { MissingApiKey } from "./bearer.js";

/**
 * How a route writes errors. `openai`: `{"error": {"message", "type", "code", "param"}}`
 * (chat completions). `detail`: `{"detail": {"error_type", "message"}}`, and validation
 * failures as 422 `{"detail": [{"loc", "msg", "type"}]}` (System One and the model listing),
 * each with the same `error` object beside it, so that both client families read one body.
 */
export type ErrorStyle = "openai" | "detail";

/** One problem found in a request body, as FastAPI reports it. */
export interface Violation {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export interface HttpErrorOptions {
  /** The OpenAI-style `code`; defaults to a code derived from the type. */
  code?: string;
  /** The OpenAI-style `param`: the request field at fault. */
  param?: string | null;
  headers?: Record<string, string>;
  /** Validation problems: 422 in the detail style, 400 naming the first one in the openai style. */
  violations?: Violation[];
}

/** An error answer: status, API-document type, message, and what each style needs. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly options: HttpErrorOptions = {},
  ) {
    super(message);
    this.name = "HttpError";
  }

  static invalid(violations: Violation[]): HttpError {
    const first = violations[0];
    // The message names the field as `param` does (no internal `body.`); `detail[]` keeps each loc whole.
    const at = first === undefined ? null : paramOf(first.loc);
    const message = first === undefined ? "invalid request" : at === null ? first.msg : `${at}: ${first.msg}`;
    const more = violations.length > 1 ? ` (and ${violations.length - 1} more problem${violations.length > 2 ? "s" : ""})` : "";
    return new HttpError(400, "invalid_request_error", message + more, {
      code: "invalid_request",
      param: at,
      violations,
    });
  }
}

/** `["body", "messages", 0, "content"]` → `messages[0].content`. */
function paramOf(loc: (string | number)[]): string | null {
  const path = loc[0] === "body" ? loc.slice(1) : loc;
  if (path.length === 0) return null;
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");
}

interface Mapping {
  status: number;
  type: string;
  code: string;
}

/** The one table from Connect codes to HTTP answers (details refine it: see errorFromConnect). */
export const CONNECT_TO_HTTP: Readonly<Record<Code, Mapping>> = {
  [Code.Canceled]: { status: 499, type: "api_error", code: "canceled" },
  [Code.Unknown]: { status: 500, type: "api_error", code: "internal_error" },
  [Code.InvalidArgument]: { status: 400, type: "invalid_request_error", code: "invalid_request" },
  [Code.DeadlineExceeded]: { status: 504, type: "api_error", code: "timeout" },
  [Code.NotFound]: { status: 404, type: "invalid_request_error", code: "not_found" },
  [Code.AlreadyExists]: { status: 409, type: "invalid_request_error", code: "already_exists" },
  [Code.PermissionDenied]: { status: 403, type: "permission_error", code: "permission_denied" },
  [Code.ResourceExhausted]: { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded" },
  [Code.FailedPrecondition]: { status: 400, type: "invalid_request_error", code: "failed_precondition" },
  [Code.Aborted]: { status: 503, type: "api_error", code: "aborted" },
  [Code.OutOfRange]: { status: 400, type: "invalid_request_error", code: "out_of_range" },
  [Code.Unimplemented]: { status: 501, type: "api_error", code: "not_implemented" },
  [Code.Internal]: { status: 500, type: "api_error", code: "internal_error" },
  [Code.Unavailable]: { status: 503, type: "api_error", code: "unavailable" },
  [Code.DataLoss]: { status: 500, type: "api_error", code: "internal_error" },
  [Code.Unauthenticated]: { status: 401, type: "authentication_error", code: "invalid_api_key" },
};

/** Statuses whose Connect message may say more than a client should see. */
const HIDDEN_MESSAGE = new Set([Code.Unknown, Code.Internal, Code.DataLoss]);

/**
 * Maps an error of a service call to the HTTP answer. Details win over the code: an
 * Overloaded detail is 529 `overloaded_error` with retry-after whatever the code;
 * RateLimited is 429 `rate_limit_error` with retry-after; QuotaExceeded is 429
 * `insufficient_quota`; a decision ValidationFailure lists its violations.
 */
export function errorFromConnect(err: ConnectError): HttpError {
  const overloaded = err.findDetails(OverloadedSchema)[0];
  if (overloaded !== undefined) {
    return new HttpError(529, "overloaded_error", err.rawMessage || "all generation slots are busy; retry later", {
      code: "overloaded",
      headers: { "retry-after": String(Math.max(1, overloaded.retryAfterSeconds)) },
    });
  }
  const rate = err.findDetails(RateLimitedSchema)[0];
  if (rate !== undefined) {
    return new HttpError(429, "rate_limit_error", err.rawMessage || "too many requests per minute on this key", {
      code: "rate_limit_exceeded",
      headers: { "retry-after": String(Math.max(1, rate.retryAfterSeconds)) },
    });
  }
  const quota = err.findDetails(QuotaExceededSchema)[0];
  if (quota !== undefined) {
    // Waiting does not refill a quota: `x-should-retry: false` stops the clients that read it (the
    // Stainless-style SDKs), and no retry-after invites a retry.
    return new HttpError(429, "insufficient_quota", err.rawMessage || "the quota is used up", {
      code: "insufficient_quota",
      headers: { "x-should-retry": "false" },
    });
  }
  const validation = err.findDetails(ValidationFailureSchema)[0];
  if (validation !== undefined && validation.violations.length > 0) {
    // Loc parts travel as strings; a question id "0" and an index 0 cannot be told apart here.
    return HttpError.invalid(validation.violations.map((v) => ({ loc: [...v.loc], msg: v.msg, type: v.type })));
  }
  const mapping = CONNECT_TO_HTTP[err.code] ?? CONNECT_TO_HTTP[Code.Unknown];
  const message = HIDDEN_MESSAGE.has(err.code) ? "internal error; quote the x-service-request-id when reporting it" : err.rawMessage;
  return new HttpError(mapping.status, mapping.type, message, { code: mapping.code, param: err.metadata.get(ERROR_PARAM_METADATA) });
}

/** Any thrown value as an HTTP answer; unexpected ones are 500 without their message. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof MissingApiKey) return new HttpError(403, "authentication_error", err.rawMessage, { code: "missing_api_key" });
  if (err instanceof ConnectError) return errorFromConnect(err);
  return new HttpError(500, "api_error", "internal error; quote the x-service-request-id when reporting it", { code: "internal_error" });
}

/** The status and JSON body of an error in a route's style. */
export function errorBody(style: ErrorStyle, err: HttpError): { status: number; body: unknown } {
  const { violations } = err.options;
  const error = { message: err.message, type: err.type, code: err.options.code ?? err.type, param: err.options.param ?? null };
  if (style === "detail") {
    // System One clients read `detail`; OpenAI clients (the SDKs' messages) read `error`.
    if (violations !== undefined) return { status: 422, body: { detail: violations, error } };
    return { status: err.status, body: { detail: { error_type: err.type, message: err.message }, error } };
  }
  return { status: err.status, body: { error } };
}

/** Writes an error answer at once, for answers outside a request context (no route, no request id of its own). */
export function sendError(res: ServerResponse, style: ErrorStyle, err: HttpError): void {
  const { status, body } = errorBody(style, err);
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
