import { Code, ConnectError } from "@connectrpc/connect";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../logger.js";

/** A NATS connection that reconnects forever and says whether it is connected right now. */
export interface NatsLink {
  readonly nc: NatsConnection;
  /** False from the moment the connection drops until it is back. */
  connected(): boolean;
  /** Throws Unavailable at once while NATS is away, so callers fail fast instead of waiting for timeouts. */
  ensureConnected(): void;
  /** Flushes what is buffered and closes. */
  close(): Promise<void>;
}

export interface ConnectNatsOptions {
  url: string;
  /** The client name the server shows in its monitoring (service names and pid). */
  name: string;
  logger: Logger;
  /** Between reconnect attempts (default 250 ms, plus up to 100 ms of jitter). */
  reconnectWaitMs?: number;
}

/** The URL(s) without credentials (nats://user:secret@host → nats://***@host), for logs. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/,]*@/g, "//***@");
}

/** The error every NATS-backed operation gives while NATS cannot be reached: retryable, 503 at the edge. */
export function natsUnavailable(detail = "NATS is unreachable", cause?: unknown): ConnectError {
  return new ConnectError(`${detail}; retry shortly`, Code.Unavailable, undefined, undefined, cause);
}

/**
 * Connects to NATS and stays connected: the first connection is waited for (a pod may start
 * before NATS does), later drops are retried forever, and the state is tracked from the
 * client's status events so that request paths can refuse at once while NATS is away.
 * Subscriptions, the usage consumer and KV handles carry on after a reconnect.
 */
export async function connectNats(options: ConnectNatsOptions): Promise<NatsLink> {
  const { logger } = options;
  const started = Date.now();
  logger.info({ nats: redactUrl(options.url) }, "connecting to NATS (waits until it answers)");
  const nc = await connect({
    servers: options.url
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    name: options.name,
    maxReconnectAttempts: -1,
    waitOnFirstConnect: true,
    reconnectTimeWait: options.reconnectWaitMs ?? 250,
    reconnectJitter: 100,
    // A server that vanished without closing the socket is noticed within ~20 s.
    pingInterval: 10_000,
    maxPingOut: 2,
  });
  let up = true;
  logger.info({ server: nc.getServer(), waitedMs: Date.now() - started }, "connected to NATS");

  void (async () => {
    for await (const status of nc.status()) {
      switch (status.type) {
        case "disconnect":
          if (up)
            logger.warn({ server: status.server }, "NATS connection lost; reconnecting (requests that need NATS fail with 503 meanwhile)");
          up = false;
          break;
        case "reconnect":
          up = true;
          logger.info({ server: status.server }, "NATS connection restored");
          break;
        case "staleConnection":
          up = false;
          break;
        case "error":
          logger.warn({ err: status.error }, "NATS reported an error");
          break;
        default:
          break;
      }
    }
  })().catch(() => undefined);

  return {
    nc,
    connected: () => up && !nc.isClosed(),
    ensureConnected() {
      if (!up || nc.isClosed()) throw natsUnavailable();
    },
    async close() {
      up = false;
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
}
