import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { type GenerateRequestSchema, type GenerateResponse, InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { silentLogger } from "../../lib/logger.js";
import { loadModelPool, type ModelPool, type ModelPoolOptions } from "../../services/inference/engine/model-pool.js";
import { inferenceRoutes } from "../../services/inference/server.js";
import { TINY_MODEL_DIR } from "./inference-engine.js";

/** The tiny model loaded as a worker's pool, its InferenceService reached through the in-memory router transport. */
export interface TinyInference {
  pool: ModelPool;
  client: Client<typeof InferenceService>;
}

/**
 * Serves test/fixtures/tiny-model under each of `servingIds` (default `textmodel-26b`) as
 * worker `worker-1`, one intra-op thread, 2 slots and a queue of 2 unless told otherwise.
 */
export async function startTinyInference(
  options: Partial<Pick<ModelPoolOptions, "slots" | "queue" | "wrapRunner">> & { servingIds?: readonly string[] } = {},
): Promise<TinyInference> {
  const logger = silentLogger();
  const { servingIds = ["textmodel-26b"], slots = 2, queue = 2, wrapRunner } = options;
  const pool = await loadModelPool({
    models: servingIds.map((servingId) => ({ servingId, dir: TINY_MODEL_DIR })),
    slots,
    queue,
    intraOpThreads: 1,
    logger,
    ...(wrapRunner === undefined ? {} : { wrapRunner }),
  });
  const client = createClient(InferenceService, createRouterTransport(inferenceRoutes({ pool, workerId: "worker-1" })));
  return { pool, client };
}

/** One whole Generate stream: its events, Started, Finished, the deltas and their text. */
export async function collectGeneration(client: Client<typeof InferenceService>, req: MessageInitShape<typeof GenerateRequestSchema>) {
  const events: GenerateResponse["event"][] = [];
  for await (const res of client.generate(req)) events.push(res.event);
  const started = events[0];
  const finished = events.at(-1);
  if (started?.case !== "started" || finished?.case !== "finished") throw new Error("not a whole generation");
  const deltas = events.flatMap((e) => (e.case === "delta" ? [e.value] : []));
  return {
    events,
    started: started.value,
    finished: finished.value,
    deltas,
    content: deltas.map((d) => d.content).join(""),
    reasoning: deltas.map((d) => d.reasoning).join(""),
  };
}

/** The ConnectError `run` rejects with (it must reject). */
export async function connectFailure(run: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await run();
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected an error");
}
