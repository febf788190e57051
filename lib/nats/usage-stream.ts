import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { SettleRequestSchema, type SettleRequest } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { UsageSink } from "../usage/sink.js";

export const USAGE_STREAM = "TESSERA_USAGE";
export const USAGE_SUBJECT = "tessera.usage";
export const USAGE_CONSUMER = "accounting";

/** Creates (or keeps) the work-queue stream of usage events; deduplicates by request id. */
export async function ensureUsageStream(nc: NatsConnection, replicas = 1): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const config = {
    name: USAGE_STREAM,
    subjects: [`${USAGE_SUBJECT}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    num_replicas: replicas,
    duplicate_window: nanos(10 * 60_000),
  };
  try {
    await jsm.streams.info(USAGE_STREAM);
  } catch (err) {
    if (!(err instanceof JetStreamApiError)) throw err;
    await jsm.streams.add(config);
  }
  try {
    await jsm.consumers.info(USAGE_STREAM, USAGE_CONSUMER);
  } catch (err) {
    if (!(err instanceof JetStreamApiError)) throw err;
    await jsm.consumers.add(USAGE_STREAM, {
      durable_name: USAGE_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(30_000),
      max_deliver: -1,
    });
  }
}

/** Publishes each settlement with the request id as message id: a retry is a no-op. */
export function natsUsageSink(nc: NatsConnection): UsageSink {
  const js = jetstream(nc);
  return {
    async publish(event) {
      await js.publish(`${USAGE_SUBJECT}.${event.kind}`, toBinary(SettleRequestSchema, event), {
        msgID: event.requestId,
        timeout: 5_000,
      });
    },
  };
}

export interface UsageConsumer {
  stop(): Promise<void>;
}

/**
 * Consumes usage events through the shared durable consumer (every accounting replica pulls
 * from it; each event goes to one) and acks an event only after `settle` succeeded. Settling
 * is idempotent by request id, so a redelivery after a crash never counts twice.
 */
export function startUsageConsumer(
  nc: NatsConnection,
  settle: (event: SettleRequest) => Promise<void>,
  logger: Logger,
): UsageConsumer {
  const js = jetstream(nc);
  let stopped = false;
  let current: { stop(): void } | null = null;

  const loop = async () => {
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(USAGE_STREAM, USAGE_CONSUMER);
        const messages = await consumer.consume({ max_messages: 256 });
        current = messages;
        for await (const m of messages) {
          try {
            await settle(fromBinary(SettleRequestSchema, m.data));
            m.ack();
          } catch (err) {
            logger.warn({ err, seq: m.seq }, "usage event not settled; redelivering later");
            m.nak(1_000);
          }
        }
      } catch (err) {
        if (!stopped) logger.warn({ err }, "usage consumer interrupted; retrying");
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 500));
    }
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
