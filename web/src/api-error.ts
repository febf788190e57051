/**
 * An error as the API sent it: the status, the type and code of either body shape
 * (`{"error": {message, type, code}}` or `{"detail": {error_type, message}}`), a validation
 * failure's list (`{"detail": [{loc, msg, type}]}`), `retry-after` and the request id.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly extra: { code?: string; retryAfter?: string; requestId?: string; details?: string[]; inStream?: boolean } = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The error of a response that is not ok, from its body and headers. */
export function apiErrorFrom(status: number, body: string, headers: { get(name: string): string | null }): ApiError {
  const extra: ApiError["extra"] = {};
  const retryAfter = headers.get("retry-after");
  if (retryAfter !== null) extra.retryAfter = retryAfter;
  const requestId = headers.get("x-service-request-id");
  if (requestId !== null) extra.requestId = requestId;
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return new ApiError(status, "http_error", body.trim().slice(0, 500) || `HTTP ${status}`, extra);
  }
  return errorFromBody(status, json, extra);
}

/** The error object of a JSON body (also what a stream's error event carries). */
export function errorFromBody(status: number, json: unknown, extra: ApiError["extra"] = {}): ApiError {
  // A validation failure's list first: the body may carry OpenAI's `error` beside it.
  if (isObject(json) && Array.isArray(json["detail"])) {
    extra.details = json["detail"].map((item) => {
      if (!isObject(item)) return String(item);
      const loc = Array.isArray(item["loc"]) ? item["loc"].join(".") : "";
      return `${loc}: ${text(item["msg"]) ?? ""} (${text(item["type"]) ?? ""})`;
    });
    const e = isObject(json["error"]) ? json["error"] : {};
    const code = text(e["code"]);
    if (code !== undefined) extra.code = code;
    return new ApiError(status, text(e["type"]) ?? "validation_error", text(e["message"]) ?? "the request is not valid", extra);
  }
  if (isObject(json) && isObject(json["error"])) {
    const e = json["error"];
    const code = text(e["code"]);
    if (code !== undefined) extra.code = code;
    return new ApiError(status, text(e["type"]) ?? "error", text(e["message"]) ?? "", extra);
  }
  if (isObject(json) && isObject(json["detail"])) {
    const d = json["detail"];
    return new ApiError(status, text(d["error_type"]) ?? "error", text(d["message"]) ?? "", extra);
  }
  return new ApiError(status, "error", JSON.stringify(json).slice(0, 500), extra);
}

/** What fetch throws when the server could not be reached (or the request was refused by the browser). */
export function networkError(err: unknown): ApiError {
  return new ApiError(0, "network_error", err instanceof Error ? err.message : String(err));
}
