// Asks a model directory the labelled questions in this process, through the decision service
// and the inference engine as the server runs them (same validation, rendering, readout and
// limits), and keeps the label logits each question was answered from.
//
// The logits are taken from the Score responses rather than recovered from the answers as
// log p: a noul answer carries P(yes) only, and 1 − P(yes) loses the yes/no gap beyond about
// 36 nats, which confident converted models reach. Temperature scaling needs the logits only
// up to a constant per question, so the model's current temperatures play no part.
import { type Code, ConnectError, createClient, createRouterTransport, type Interceptor } from "@connectrpc/connect";
import { DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService, type ScoreResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ModelKind, RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { Config } from "../../lib/config.js";
import { silentLogger } from "../../lib/logger.js";
import { decisionViolationsOf } from "../../lib/decision-types/request-json.js";
import type { TypedLabelledReadout } from "../../services/decision/calibrate/per-type.js";
import { decisionRoutes } from "../../services/decision/server.js";
import type { LabelledLine } from "./labelled-jsonl.js";

const SERVING_ID = "calibration";

export interface TypedReadout extends TypedLabelledReadout {
  line: number;
}

/** A line the model could not answer (too long for its context, more options than it has labels, …). */
export class LineRefusedError extends Error {
  override name = "LineRefusedError";
  constructor(
    readonly line: number,
    readonly code: Code,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
  }
}

export async function readLabelled(
  modelDir: string,
  lines: readonly LabelledLine[],
  config: Config,
  onProgress: (done: number) => void = () => undefined,
): Promise<TypedReadout[]> {
  // ONNX Runtime is a large native library: imported only when a model is read.
  const { loadModelPool } = await import("../../services/inference/engine/model-pool.js");
  const { createInferenceService } = await import("../../services/inference/service.js");
  const logger = silentLogger();
  const pool = await loadModelPool({
    models: [{ servingId: SERVING_ID, dir: modelDir }],
    slots: 1,
    queue: 1,
    maxScoreWorkTokens: config.limits.maxScoreWorkTokens,
    maxScoreRowTokens: config.limits.maxScoreRowTokens,
    prefillChunk: config.engine.prefillChunk,
    intraOpThreads: config.engine.intraOpThreads,
    executionProviders: config.engine.executionProviders,
    ortWorker: config.engine.ortWorker,
    logger,
  });
  try {
    const scores: ScoreResponse[] = [];
    const inference = createClient(
      InferenceService,
      createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, workerId: SERVING_ID })), {
        transport: { interceptors: [keepScores(scores)] },
      }),
    );
    const registry = createClient(
      RegistryService,
      createRouterTransport(({ service }) =>
        service(RegistryService, {
          resolveModel: () => ({
            model: { id: SERVING_ID, kind: ModelKind.DECISION, servingId: SERVING_ID },
            workers: [{ id: SERVING_ID, models: [SERVING_ID], slotsTotal: 1, slotsFree: 1 }],
          }),
        }),
      ),
    );
    const decision = createClient(
      DecisionService,
      createRouterTransport(decisionRoutes({ registry, inferenceFor: () => inference, logger })),
    );

    const readouts: TypedReadout[] = [];
    for (const [done, labelled] of lines.entries()) {
      scores.length = 0;
      try {
        await decision.decide(labelled.request);
      } catch (err) {
        throw refused(labelled.line, err);
      }
      const results = scores[0]!.results;
      labelled.questions.forEach((q, i) => {
        readouts.push({ line: labelled.line, type: q.type, logits: results[i]!.logits, target: q.target });
      });
      onProgress(done + 1);
    }
    return readouts;
  } finally {
    await pool.close();
  }
}

/** Keeps every Score response the decision service receives (one per decision, its rows in question order). */
function keepScores(into: ScoreResponse[]): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (!res.stream && req.method.name === "Score") into.push(res.message as ScoreResponse);
    return res;
  };
}

function refused(line: number, err: unknown): LineRefusedError {
  const e = ConnectError.from(err);
  const violations = decisionViolationsOf(e);
  const message =
    violations !== undefined && violations.length > 0
      ? violations.map((v) => `${(v.loc[0] === "body" ? v.loc.slice(1) : v.loc).join(".")}: ${v.msg}`).join("; ")
      : e.rawMessage;
  return new LineRefusedError(line, e.code, message);
}
