import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { InferenceService, OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import type { LiveWorker, WorkerDirectory } from "./heartbeats/types.js";

export interface InferenceRouterDeps {
  /** Live workers, least loaded first. */
  workers: WorkerDirectory;
  /** How to reach one worker: the in-memory transport of this process's worker, or Connect over HTTP. */
  transportFor: (worker: LiveWorker) => Transport;
}

export type InferenceFor = (servingId: string) => Client<typeof InferenceService>;

/**
 * Clients of "whichever live worker serves this model". Every call picks the least-loaded
 * live worker at that moment; a unary call refused as Overloaded moves on to the next
 * worker, so the caller sees Overloaded only when every worker is full. With no live worker
 * the call fails with Unavailable.
 */
export function createInferenceRouter({ workers, transportFor }: InferenceRouterDeps): InferenceFor {
  const transports = new Map<string, Transport>();
  const clients = new Map<string, Client<typeof InferenceService>>();

  const reach = (worker: LiveWorker) => {
    const key = `${worker.id}\u0000${worker.address}`;
    let transport = transports.get(key);
    if (transport === undefined) {
      transport = transportFor(worker);
      transports.set(key, transport);
    }
    return transport;
  };

  const candidates = (servingId: string) => {
    const serving = workers.live().filter((w) => w.models.includes(servingId));
    if (serving.length === 0) throw new ConnectError(`no live inference worker serves model "${servingId}"`, Code.Unavailable);
    return serving;
  };

  const routing = (servingId: string): Transport => ({
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      let overloaded: unknown;
      for (const worker of candidates(servingId)) {
        try {
          return await reach(worker).unary(method, signal, timeoutMs, header, input, contextValues);
        } catch (err) {
          if (!isOverloaded(err)) throw err;
          overloaded = err;
        }
      }
      throw overloaded;
    },
    // A stream's input cannot be replayed, so it goes to the least-loaded worker only.
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const [worker] = candidates(servingId);
      return reach(worker!).stream(method, signal, timeoutMs, header, input, contextValues);
    },
  });

  return (servingId: string) => {
    let client = clients.get(servingId);
    if (client === undefined) {
      client = createClient(InferenceService, routing(servingId));
      clients.set(servingId, client);
    }
    return client;
  };
}

export function isOverloaded(err: unknown): boolean {
  return err instanceof ConnectError && err.findDetails(OverloadedSchema).length > 0;
}
