import type { DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type StreamResponse, type Transport } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { InferenceService, OverloadedSchema } from "../gen/tessera/inference/v1/inference_pb.js";
import type { LiveWorker, WorkerDirectory } from "./heartbeats/types.js";
import { connectTransport } from "./remote/clients.js";
import { isConnectionFailure, peerGone } from "./remote/errors.js";

export interface InferenceRouterDeps {
  /** Live workers, least loaded first. */
  workers: WorkerDirectory;
  /** How to reach one worker: the in-memory transport of this process's worker, or Connect over HTTP. */
  transportFor: (worker: LiveWorker) => Transport;
}

export type InferenceFor = (servingId: string) => Client<typeof InferenceService>;

/**
 * How a process reaches each worker (`transportFor`): its own worker (`ownId`) through
 * `own`, in-process; the others over Connect at the address they announce. A worker that
 * announces none serves only the gateway of its own process.
 */
export function workerTransports(ownId: string, own: Transport | undefined): (worker: LiveWorker) => Transport {
  return (worker) => {
    if (worker.id === ownId && own !== undefined) return own;
    if (worker.address === "") {
      throw new ConnectError(
        `inference worker ${worker.id} announced no address: it serves only the gateway of its own process`,
        Code.Unavailable,
      );
    }
    return connectTransport(worker.address);
  };
}

/**
 * Clients of "whichever live worker serves this model". Every call picks the least-loaded
 * live worker at that moment and moves on to the next one when the worker refuses it as
 * Overloaded, answers Unavailable, or cannot be reached, so the caller sees Overloaded only
 * when every worker is full. A stream moves on only before its first message; a worker
 * that breaks off later ends the stream with Unavailable. A worker that could not be
 * reached is tried last until it is heard from again (a killed worker stays "live" in the
 * directory until its heartbeat expires). With no live worker the call fails Unavailable.
 */
export function createInferenceRouter({ workers, transportFor }: InferenceRouterDeps): InferenceFor {
  const transports = new Map<string, Transport>();
  const clients = new Map<string, Client<typeof InferenceService>>();
  /** Worker id → the heartbeat time it had when it could not be reached. */
  const unreachable = new Map<string, number>();

  const reach = (worker: LiveWorker) => {
    const key = `${worker.id}\u0000${worker.address}`;
    let transport = transports.get(key);
    if (transport === undefined) {
      transport = transportFor(worker);
      transports.set(key, transport);
    }
    return transport;
  };

  const markUnreachable = (worker: LiveWorker) => unreachable.set(worker.id, worker.lastSeenUnixMs);

  const candidates = (servingId: string) => {
    const serving = workers.live().filter((w) => w.models.includes(servingId));
    if (serving.length === 0) throw new ConnectError(`no live inference worker serves model "${servingId}"`, Code.Unavailable);
    const isSuspect = (w: LiveWorker) => {
      const markedAt = unreachable.get(w.id);
      if (markedAt === undefined) return false;
      if (w.lastSeenUnixMs > markedAt) {
        unreachable.delete(w.id);
        return false;
      }
      return true;
    };
    return [...serving.filter((w) => !isSuspect(w)), ...serving.filter(isSuspect)];
  };

  /** Whether a failure on one worker should send the call to the next. */
  const tryNext = (worker: LiveWorker, err: unknown, signal: AbortSignal | undefined): boolean => {
    if (signal?.aborted === true) return false;
    if (isConnectionFailure(err, signal)) {
      markUnreachable(worker);
      return true;
    }
    return isOverloaded(err) || (err instanceof ConnectError && err.code === Code.Unavailable);
  };

  /** Overloaded when some worker was full (the others failing too), else the last failure. */
  const finalError = (errors: unknown[]) => errors.find(isOverloaded) ?? errors[errors.length - 1];

  const routing = (servingId: string): Transport => ({
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const errors: unknown[] = [];
      for (const worker of candidates(servingId)) {
        try {
          return await reach(worker).unary(method, signal, timeoutMs, header, input, contextValues);
        } catch (err) {
          if (!tryNext(worker, err, signal)) throw err;
          errors.push(err);
        }
      }
      throw finalError(errors);
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: Parameters<Transport["stream"]>[0] & { input: I; output: O },
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: Parameters<Transport["stream"]>[3],
      input: AsyncIterable<unknown>,
      contextValues: Parameters<Transport["stream"]>[5],
    ): Promise<StreamResponse<I, O>> {
      const list = candidates(servingId);
      if (method.methodKind !== "server_streaming") {
        return reach(list[0]!).stream(method, signal, timeoutMs, header, input as never, contextValues) as Promise<StreamResponse<I, O>>;
      }
      // One request message: kept, so that the call can be sent again to the next worker.
      const messages: unknown[] = [];
      for await (const message of input) messages.push(message);
      const errors: unknown[] = [];
      for (const worker of list) {
        let response: StreamResponse<I, O>;
        let iterator: AsyncIterator<unknown>;
        let first: IteratorResult<unknown>;
        try {
          response = (await reach(worker).stream(
            method,
            signal,
            timeoutMs,
            header,
            createAsyncIterable(messages) as never,
            contextValues,
          )) as StreamResponse<I, O>;
          iterator = response.message[Symbol.asyncIterator]();
          first = await iterator.next();
        } catch (err) {
          if (!tryNext(worker, err, signal)) throw err;
          errors.push(err);
          continue;
        }
        const rest = async function* () {
          if (first.done === true) return;
          yield first.value;
          try {
            for (;;) {
              const next = await iterator.next();
              if (next.done === true) return;
              yield next.value;
            }
          } catch (err) {
            if (!isConnectionFailure(err, signal)) throw err;
            markUnreachable(worker);
            throw peerGone(`inference worker ${worker.id}`, err);
          } finally {
            await iterator.return?.();
          }
        };
        return { ...response, message: rest() } as unknown as StreamResponse<I, O>;
      }
      throw finalError(errors);
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
