import { Code, ConnectError } from "@connectrpc/connect";

/** Node and HTTP/2 error codes of a peer that is gone or a connection that broke. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_INVALID_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_ERROR",
]);

function causeCodes(err: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  for (let current: unknown = err; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    const code = (current as NodeJS.ErrnoException).code;
    if (typeof code === "string") codes.push(code);
  }
  return codes;
}

/**
 * The call got no answer from the service: the peer could not be reached, or the connection
 * broke under the call (a process killed mid-stream shows as an HTTP/2 stream closed with
 * CANCEL that the caller did not ask for). Never true once the caller's own signal aborted.
 */
export function isConnectionFailure(err: unknown, callerSignal?: AbortSignal): boolean {
  if (!(err instanceof ConnectError) || callerSignal?.aborted === true) return false;
  if (causeCodes(err).some((code) => CONNECTION_CODES.has(code))) return true;
  return err.code === Code.Canceled && /http\/2 stream closed/i.test(err.rawMessage);
}

/** Worth trying another replica: it was unreachable, or it answered Unavailable. */
export function isRetryableElsewhere(err: unknown, callerSignal?: AbortSignal): boolean {
  if (isConnectionFailure(err, callerSignal)) return true;
  return err instanceof ConnectError && err.code === Code.Unavailable && callerSignal?.aborted !== true;
}

/** What a caller is told when the peer broke off: retryable, 503 at the edge. */
export function peerGone(what: string, err: unknown): ConnectError {
  const reason = err instanceof ConnectError ? err.rawMessage : String(err);
  return new ConnectError(`${what} stopped answering (${reason}); retry`, Code.Unavailable, undefined, undefined, err);
}
