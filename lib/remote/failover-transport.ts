import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { isConnectionFailure, isRetryableElsewhere } from "./errors.js";

export interface FailoverTarget {
  /** Shown in errors and logs (the base URL). */
  name: string;
  transport: Transport;
}

export interface FailoverOptions {
  /** How long a replica that could not be reached is tried last (default 2 s). */
  downMs?: number;
  clock?: () => number;
}

/**
 * One Transport over several replicas of a service (TESSERA_ACCOUNTING_URL with several
 * URLs). Calls are spread round-robin; a call that finds its replica unreachable, or gets
 * Unavailable from it, is tried on the next one, so the caller sees a failure only when
 * every replica failed. A replica that could not be reached is put last for `downMs`.
 * Unary calls only are retried: a stream's input cannot be replayed, so a stream goes to
 * the first replica in that order.
 */
export function createFailoverTransport(targets: readonly FailoverTarget[], options: FailoverOptions = {}): Transport {
  if (targets.length === 0) throw new Error("createFailoverTransport: no targets");
  const downMs = options.downMs ?? 2_000;
  const clock = options.clock ?? Date.now;
  const downUntil = new Array<number>(targets.length).fill(0);
  let next = 0;

  const order = (): number[] => {
    const start = next;
    next = (next + 1) % targets.length;
    const now = clock();
    const all = targets.map((_, i) => (start + i) % targets.length);
    return [...all.filter((i) => downUntil[i]! <= now), ...all.filter((i) => downUntil[i]! > now)];
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      let last: unknown;
      for (const i of order()) {
        try {
          const response = await targets[i]!.transport.unary(method, signal, timeoutMs, header, input, contextValues);
          downUntil[i] = 0;
          return response;
        } catch (err) {
          if (!isRetryableElsewhere(err, signal)) throw err;
          if (isConnectionFailure(err, signal)) downUntil[i] = clock() + downMs;
          last = err;
        }
      }
      throw targets.length === 1
        ? last
        : new ConnectError(
            `${method.parent.name}.${method.name}: no replica answered (${targets.map((t) => t.name).join(", ")}): ${ConnectError.from(last).rawMessage}`,
            Code.Unavailable,
            undefined,
            undefined,
            last,
          );
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      const [first] = order();
      return targets[first!]!.transport.stream(method, signal, timeoutMs, header, input, contextValues);
    },
  };
}
