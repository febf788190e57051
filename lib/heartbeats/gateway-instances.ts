import { randomBytes } from "node:crypto";
import type { Logger } from "../logger.js";
import type { KvBucket, Store } from "../store/index.js";

/** Where gateways announce themselves (distributed mode): one entry per running gateway process. */
export const GATEWAY_INSTANCES_BUCKET = "gateway_instances";
/** A gateway not heard from for this long is taken for dead: the bucket's entries expire then. */
export const GATEWAY_HEARTBEAT_TTL_MS = 10_000;
export const GATEWAY_HEARTBEAT_INTERVAL_MS = 1_000;

export interface GatewayBeat {
  at: number;
}

export const gatewayInstances = (store: Store): KvBucket<GatewayBeat> =>
  store.bucket<GatewayBeat>(GATEWAY_INSTANCES_BUCKET, { ttlMs: GATEWAY_HEARTBEAT_TTL_MS });

/**
 * A new id for this gateway process. Random per start, never the host's name: a gateway that
 * restarts on the same host must not look alive to the sweep for the requests of its dead self.
 */
export const newGatewayInstance = () => `gw_${randomBytes(9).toString("base64url")}`;

export interface GatewayHeartbeat {
  instance: string;
  /** Whether a beat has been written: only then may requests name this instance (else the sweep would take it for dead). */
  announced(): boolean;
  /** Stops beating. The entry is left to expire: usage this gateway published may still be on its way to accounting. */
  stop(): void;
}

/** Writes this gateway's heartbeat now (awaited) and then every interval; failures are logged and retried on the next beat. */
export async function startGatewayHeartbeat(
  bucket: KvBucket<GatewayBeat>,
  logger: Logger,
  instance = newGatewayInstance(),
  intervalMs = GATEWAY_HEARTBEAT_INTERVAL_MS,
): Promise<GatewayHeartbeat> {
  let announced = false;
  let failing = false;
  const beat = async () => {
    try {
      await bucket.put(instance, { at: Date.now() });
      announced = true;
      if (failing) logger.info({ instance }, "gateway heartbeat written again");
      failing = false;
    } catch (err) {
      if (!failing) logger.warn({ err, instance }, "gateway heartbeat not written; retrying");
      failing = true;
    }
  };
  await beat();
  const timer = setInterval(() => void beat(), intervalMs);
  timer.unref();
  return {
    instance,
    announced: () => announced,
    stop: () => clearInterval(timer),
  };
}
