import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createFailoverTransport } from "./failover-transport.js";

export interface RemoteTransportOptions {
  /** Deadline of every call that sets none itself. */
  timeoutMs?: number;
  interceptors?: Interceptor[];
}

/**
 * Connect over HTTP/2 (h2c for http://, TLS for https://), binary Protobuf: the transport of
 * one internal service address. One HTTP/2 connection per address carries every call.
 */
export function connectTransport(baseUrl: string, options: RemoteTransportOptions = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    ...(options.timeoutMs !== undefined && { defaultTimeoutMs: options.timeoutMs }),
    ...(options.interceptors !== undefined && { interceptors: options.interceptors }),
    // A peer that vanished without closing the connection is noticed.
    pingIntervalMs: 10_000,
    pingTimeoutMs: 5_000,
  });
}

/** The transport of a service given by one or several base URLs (replicas, with failover). */
export function serviceTransport(urls: readonly string[], options: RemoteTransportOptions = {}): Transport {
  if (urls.length === 0) throw new Error("serviceTransport: no URL");
  if (urls.length === 1) return connectTransport(urls[0]!, options);
  return createFailoverTransport(urls.map((url) => ({ name: url, transport: connectTransport(url, options) })));
}

/** Sends `authorization: Bearer <token>` on every call (internal and admin credentials). */
export function bearerInterceptor(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}
