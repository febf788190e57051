import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JsMsg,
} from "@nats-io/jetstream";
import { millis, nanos, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../logger.js";
import { SettleRequestSchema, type SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { UsageSink } from "../usage/sink.js";
import { natsUnavailable } from "./connection.js";
import { asUnavailable } from "./kv-store.js";

export const USAGE_STREAM = "TESSERA_USAGE";
export const USAGE_SUBJECT = "tessera.usage";
export const USAGE_CONSUMER = "accounting";
/** Publishing the same request id again within this window is a no-op (JetStream deduplication). */
export const USAGE_DUPLICATE_WINDOW_MS = 10 * 60_000;

export interface UsageStreamOptions {
  /** Replicas of the stream (3 on a NATS cluster). */
  replicas?: number;
  /** An event not acked within this time is redelivered (default 30 s); an existing consumer is updated. */
  ackWaitMs?: number;
}

/**
 * Creates (or keeps) the work-queue stream of usage events, deduplicated by request id, and
 * its durable consumer with explicit acks. Every accounting replica calls this at start.
 */
export async function ensureUsageStream(nc: NatsConnection, options: UsageStreamOptions = {}): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const ackWait = nanos(options.ackWaitMs ?? 30_000);
  try {
    await jsm.streams.info(USAGE_STREAM);
  } catch (err) {
    if (!(err instanceof JetStreamApiError)) throw err;
    await jsm.streams.add({
      name: USAGE_STREAM,
      subjects: [`${USAGE_SUBJECT}.>`],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: options.replicas ?? 1,
      duplicate_window: nanos(USAGE_DUPLICATE_WINDOW_MS),
    });
  }
  try {
    const info = await jsm.consumers.info(USAGE_STREAM, USAGE_CONSUMER);
    if (options.ackWaitMs !== undefined && info.config.ack_wait !== ackWait) {
      await jsm.consumers.update(USAGE_STREAM, USAGE_CONSUMER, { ack_wait: ackWait });
    }
  } catch (err) {
    if (!(err instanceof JetStreamApiError)) throw err;
    await jsm.consumers.add(USAGE_STREAM, {
      durable_name: USAGE_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: ackWait,
      max_deliver: -1,
    });
  }
}

export interface NatsUsageSinkOptions {
  /** How long JetStream may take to confirm a publish (default 5 s). */
  timeoutMs?: number;
  /** Whether NATS is reachable now; while not, publish fails at once. */
  connected?: () => boolean;
}

/** Publishes each settlement with the request id as message id: a retry is a no-op. */
export function natsUsageSink(nc: NatsConnection, options: NatsUsageSinkOptions = {}): UsageSink {
  const js = jetstream(nc);
  const connected = options.connected ?? (() => !nc.isClosed());
  return {
    async publish(event) {
      if (!connected()) throw natsUnavailable();
      try {
        await js.publish(`${USAGE_SUBJECT}.${event.kind}`, toBinary(SettleRequestSchema, event), {
          msgID: event.requestId,
          timeout: options.timeoutMs ?? 5_000,
        });
      } catch (err) {
        throw asUnavailable(err);
      }
    },
  };
}

export interface UsageConsumer {
  stop(): Promise<void>;
}

export interface UsageConsumerOptions {
  /** Events settled at the same time by this replica (default 32). */
  concurrency?: number;
}

/**
 * Consumes usage events through the shared durable consumer (every accounting replica pulls
 * from it; each event goes to one) and acks an event only after `settle` succeeded; a failed
 * settle is redelivered a second later. Settling is idempotent by request id, so a
 * redelivery after a crash never counts twice. Survives NATS going away: the loop pulls
 * again once it is back.
 */
export function startUsageConsumer(
  nc: NatsConnection,
  settle: (event: SettleRequest) => Promise<void>,
  logger: Logger,
  options: UsageConsumerOptions = {},
): UsageConsumer {
  const js = jetstream(nc);
  const concurrency = Math.max(1, options.concurrency ?? 32);
  let stopped = false;
  let current: { stop(): void } | null = null;
  const inFlight = new Set<Promise<void>>();

  const handle = async (m: JsMsg) => {
    let event: SettleRequest;
    try {
      event = fromBinary(SettleRequestSchema, m.data);
    } catch (err) {
      // Nothing can ever settle it; keep it out of the way of the others.
      logger.error({ err, seq: m.seq }, "malformed usage event dropped");
      m.term();
      return;
    }
    try {
      await settle(event);
      m.ack();
    } catch (err) {
      logger.warn(
        { err, seq: m.seq, requestId: event.requestId, deliveries: m.info.deliveryCount },
        "usage event not settled; redelivering later",
      );
      m.nak(1_000);
    }
  };

  const loop = async () => {
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(USAGE_STREAM, USAGE_CONSUMER);
        const messages = await consumer.consume({ max_messages: Math.max(64, concurrency * 2) });
        current = messages;
        for await (const m of messages) {
          const job = handle(m).finally(() => inFlight.delete(job));
          inFlight.add(job);
          if (inFlight.size >= concurrency) await Promise.race(inFlight);
        }
      } catch (err) {
        if (!stopped) logger.warn({ err }, "usage consumer interrupted; retrying");
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await Promise.allSettled([...inFlight]);
  };
  const done = loop();

  return {
    async stop() {
      stopped = true;
      current?.stop();
      await done;
    },
  };
}

/** The ack wait the durable consumer has now, in ms (for tests and diagnostics). */
export async function usageAckWaitMs(nc: NatsConnection): Promise<number> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.consumers.info(USAGE_STREAM, USAGE_CONSUMER);
  return millis(info.config.ack_wait ?? 0);
}
