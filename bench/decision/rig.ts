// The decision and inference services over one model, in process, instrumented phase by phase
// (bench/decision.ts and bench/decision-wide.ts measure through it).
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { DecisionService, type DecideRequest, type Question } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { silentLogger } from "../../lib/logger.js";
import { questionTypeOf } from "../../lib/decision-types/registry.js";
import { decisionRoutes } from "../../services/decision/server.js";
import { DEFAULT_CATALOG, fakeRegistry } from "../../test/helpers/decision-doubles.js";
import { loadModelPool, type ModelPool } from "../../services/inference/engine/model-pool.js";
import { lastWorkerRun } from "../../services/inference/onnx/onnx-worker-session.js";
import { createInferenceService } from "../../services/inference/service.js";
import type { DecisionPhases } from "./phases.js";
import { SENTENCES } from "./questions.js";

interface Forward {
  prefill: boolean;
  wallMs: number;
  runMs: number;
  fillMs: number;
}

/** The decision and inference services over one model, instrumented phase by phase. */
export interface Rig {
  pool: ModelPool;
  inference: Client<typeof InferenceService>;
  /** One timed decision. */
  decide(req: DecideRequest): Promise<{ phases: DecisionPhases; inputTokens: number }>;
  /** A state of about `tokens` tokens of the model's tokenizer, grown sentence by sentence. */
  stateOf(tokens: number): Promise<{ state: string; tokens: number }>;
}

/** `rowTokens`: TESSERA_MAX_DECISION_ROW_TOKENS (the engine's default when unset); `threads`: ONNX Runtime's intra-op threads. */
export async function openRig(modelDir: string, rowTokens?: number, threads?: number): Promise<Rig> {
  const forwards: Forward[] = [];
  const pool = await loadModelPool({
    models: [{ servingId: "bundled", dir: modelDir }],
    ...(rowTokens === undefined ? {} : { maxScoreRowTokens: rowTokens }),
    ...(threads === undefined ? {} : { intraOpThreads: threads }),
    slots: 4,
    queue: 16,
    wrapRunner: (inner) => ({
      async run(inputs, fetch) {
        const started = performance.now();
        const out = await inner.run(inputs, fetch);
        const wallMs = performance.now() - started;
        const worker = lastWorkerRun(pool.runtimes[0]!.model.session);
        forwards.push({ prefill: fetch.present, wallMs, runMs: worker?.runMs ?? wallMs, fillMs: worker?.fillMs ?? 0 });
        return out;
      },
    }),
  });
  const engine = pool.runtimes[0]!;
  const tokenizer = engine.model.tokenizer;
  const encode = tokenizer.encode.bind(tokenizer);
  let tokenizeMs = 0;
  tokenizer.encode = (text) => {
    const started = performance.now();
    try {
      return encode(text);
    } finally {
      tokenizeMs += performance.now() - started;
    }
  };

  const logger = silentLogger();
  const inference = createClient(
    InferenceService,
    createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, workerId: "bench" }))),
  );
  // The decision service's client of the inference service, timing Score and keeping its logits.
  let scoreMs = 0;
  let scoreLogits: number[][] = [];
  const timedInference = new Proxy(inference, {
    get(target, prop, receiver) {
      if (prop !== "score") return Reflect.get(target, prop, receiver) as unknown;
      return async (...args: Parameters<typeof inference.score>) => {
        const started = performance.now();
        const res = await target.score(...args);
        scoreMs += performance.now() - started;
        scoreLogits = res.results.map((r) => r.logits);
        return res;
      };
    },
  });
  const registry = createClient(
    RegistryService,
    createRouterTransport(({ service }) => service(RegistryService, fakeRegistry(DEFAULT_CATALOG))),
  );
  const decision = createClient(
    DecisionService,
    createRouterTransport(decisionRoutes({ registry, inferenceFor: () => timedInference, logger })),
  );

  return {
    pool,
    inference,
    async decide(req) {
      forwards.length = 0;
      tokenizeMs = 0;
      scoreMs = 0;
      const started = performance.now();
      const cpuStarted = process.cpuUsage();
      const res = await decision.decide(req);
      const total = performance.now() - started;
      const cpuUsed = process.cpuUsage(cpuStarted);
      const sum = (fs: Forward[], f: (x: Forward) => number) => fs.reduce((s, x) => s + f(x), 0);
      const prefill = forwards.filter((f) => f.prefill);
      const rows = forwards.filter((f) => !f.prefill);
      const questions = req.questionList.flatMap((q) => (q.question === undefined ? [] : [q.question]));
      return {
        inputTokens: res.usage?.inputTokens ?? 0,
        phases: {
          total,
          cpu: (cpuUsed.user + cpuUsed.system) / 1000,
          tokenize: tokenizeMs,
          prefill: sum(prefill, (f) => f.runMs),
          rows: sum(rows, (f) => f.runMs),
          rowForwards: rows.length,
          fill: sum(forwards, (f) => f.fillMs),
          transport: sum(forwards, (f) => f.wallMs - f.runMs - f.fillMs),
          inferenceOther: scoreMs - tokenizeMs - sum(forwards, (f) => f.wallMs),
          decisionOther: total - scoreMs,
          softmax: softmaxMs(scoreLogits, questions),
        },
      };
    },
    async stateOf(tokens) {
      const sentences: string[] = [];
      let count = 0;
      for (let i = 0; count < tokens; i++) {
        sentences.push(`${i + 1}. ${SENTENCES[i % SENTENCES.length]}`);
        count = (await inference.countTokens({ model: "bundled", text: sentences.join("\n") })).tokens;
      }
      return { state: sentences.join("\n"), tokens: count };
    },
  };
}

/** Every answer from its logits, as the decision service computes them with each type's module (mean of 50). */
function softmaxMs(logits: number[][], questions: Question[]): number {
  const answerers = questions.map((q) => {
    const type = questionTypeOf(q.type);
    const criteria = type?.criteriaFromProto(q.criteria, [], []);
    return (l: number[]) => type?.answer(criteria, l, 1);
  });
  const started = performance.now();
  for (let r = 0; r < 50; r++) {
    logits.forEach((l, i) => {
      answerers[i]?.(l);
    });
  }
  return (performance.now() - started) / 50;
}
