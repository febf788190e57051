import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { clientHeaders } from "../../lib/client-header.js";
import {
  AnswerSchema,
  type DecisionService,
  DecisionUsageSchema,
  IdentifiedAnswerSchema,
  ValidationFailureSchema,
  type Answer,
  type DecideRequest,
  type DecideResponse,
} from "../../gen/tessera/decision/v1/decision_pb.js";
import type { InferenceService, ScoreResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type { RegistryService, ModelEntry } from "../../gen/tessera/registry/v1/registry_pb.js";
import type { Logger } from "../../lib/logger.js";
import { defineKey } from "../../lib/decision-types/json-value.js";
import { DecisionRenderError } from "../../lib/decision-types/question-type.js";
import type { Violation } from "../../lib/decision-types/rules.js";
import { DecisionConfigError } from "../../lib/decision-types/model-config.js";
import { compileDecisionConfig, DecisionTypeUnsupported, type CompiledDecisionConfig } from "../../lib/decision-types/render.js";
import { checkDecideRequest, type CheckedQuestion } from "./validate.js";

export interface DecisionDeps {
  registry: Client<typeof RegistryService>;
  /** A client of an inference worker that serves the model with this serving id. */
  inferenceFor: (servingId: string) => Client<typeof InferenceService>;
  logger: Logger;
}

const MODEL_INFO_TIMEOUT_MS = 30_000;

/** What the service needs to know about a model, fetched once per serving id. */
interface DecisionModel {
  compiled: CompiledDecisionConfig;
  maxPositions: number;
}

export function createDecisionService(deps: DecisionDeps): ServiceImpl<typeof DecisionService> {
  const { registry, inferenceFor, logger } = deps;
  const models = new Map<string, Promise<DecisionModel>>();

  function decisionModel(servingId: string): Promise<DecisionModel> {
    let model = models.get(servingId);
    if (model === undefined) {
      // Shared by concurrent requests, so it is not bound to the signal of the one that started it.
      model = loadDecisionModel(inferenceFor(servingId), servingId);
      models.set(servingId, model);
      // A failure (model not loaded yet, worker gone) is not remembered: the next request retries.
      model.catch(() => models.delete(servingId));
    }
    return model;
  }

  return {
    async decide(req: DecideRequest, ctx: HandlerContext): Promise<Omit<DecideResponse, "$typeName">> {
      const checked = checkDecideRequest(req);
      if (!checked.ok) throw validationError(checked.violations);

      const entry = await resolve(registry, req.model, ctx.signal);
      const servingId = entry.servingId || entry.id;
      const model = await decisionModel(servingId);
      const { compiled } = model;

      const prefix = compiled.renderPrefix(checked.state);
      const suffixes = checked.questions.map(({ id, question }) => {
        try {
          return compiled.renderQuestion(question);
        } catch (err) {
          if (err instanceof DecisionTypeUnsupported) {
            throw new ConnectError(
              `model "${entry.id}" ${err.message}, so it cannot answer question ${JSON.stringify(id)}`,
              Code.InvalidArgument,
            );
          }
          if (err instanceof DecisionRenderError) {
            throw validationError([{ loc: ["body", "questions", id, "criteria"], msg: err.message, type: "value_error" }]);
          }
          throw err;
        }
      });

      const scores = await inferenceFor(servingId)
        .score(
          {
            requestId: req.requestId,
            model: servingId,
            prefix,
            suffixes: suffixes.map(({ suffix, labels }) => ({ text: suffix, labels })),
            countOnly: req.countOnly,
          },
          { signal: ctx.signal, headers: clientHeaders(ctx.requestHeader) },
        )
        .catch((err: unknown) => {
          throw inQuestionTerms(err, checked.questions);
        });
      const usage = create(DecisionUsageSchema, { inputTokens: scores.inputTokens, outputTokens: 0 });
      if (req.countOnly) return { model: entry.id, answers: {}, answerList: [], usage };
      checkScores(scores, suffixes, checked.questions, model.maxPositions, req.model);

      const answers: { [id: string]: Answer } = {};
      const answerList = checked.questions.map(({ id, type, question }, i) => {
        const logits = scores.results[i]!.logits;
        const answer = create(AnswerSchema, type.answer(question.criteria, logits, compiled.config.temperatures[type.name]));
        defineKey(answers, id, answer);
        return create(IdentifiedAnswerSchema, { id, answer });
      });
      logger.debug({ requestId: req.requestId, model: entry.id, questions: answerList.length, inputTokens: scores.inputTokens }, "decided");
      return {
        model: entry.id,
        answers,
        answerList,
        usage,
      };
    },
  };
}

async function resolve(registry: Client<typeof RegistryService>, model: string, signal: AbortSignal): Promise<ModelEntry> {
  try {
    const res = await registry.resolveModel({ model }, { signal });
    if (res.model === undefined) throw new ConnectError(`unknown model "${model}"`, Code.InvalidArgument);
    if (res.workers.length === 0) {
      throw new ConnectError(`model "${model}" is not served by any worker right now`, Code.Unavailable);
    }
    return res.model;
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.NotFound) throw new ConnectError(`unknown model "${model}"`, Code.InvalidArgument);
    throw e;
  }
}

async function loadDecisionModel(inference: Client<typeof InferenceService>, servingId: string): Promise<DecisionModel> {
  const info = await inference.getModelInfo({ model: servingId }, { timeoutMs: MODEL_INFO_TIMEOUT_MS });
  if (info.decision === undefined) {
    throw new ConnectError(`model "${servingId}" has no decision configuration (decision.json)`, Code.InvalidArgument);
  }
  try {
    return { compiled: compileDecisionConfig(info.decision, { markUserText: true }), maxPositions: info.maxPositions };
  } catch (err) {
    if (err instanceof DecisionConfigError) {
      throw new ConnectError(`model "${servingId}": ${err.message}`, Code.Internal);
    }
    throw err;
  }
}

/** Inference names a question by its suffix's index (`suffixes[2]`); the client knows it by its id. */
function inQuestionTerms(err: unknown, questions: readonly { id: string }[]): unknown {
  if (!(err instanceof ConnectError) || !/suffixes\[\d+\]/.test(err.rawMessage)) return err;
  const message = err.rawMessage.replace(/suffixes\[(\d+)\]/g, (text, i: string) => {
    const id = questions[Number(i)]?.id;
    return id === undefined ? text : `question ${JSON.stringify(id)}`;
  });
  const renamed = new ConnectError(message, err.code, err.metadata, undefined, err.cause);
  renamed.details = err.details;
  return renamed;
}

function checkScores(
  scores: ScoreResponse,
  suffixes: { labels: string[] }[],
  questions: CheckedQuestion[],
  maxPositions: number,
  model: string,
): void {
  if (scores.results.length !== suffixes.length) {
    throw new ConnectError(`inference returned ${scores.results.length} results for ${suffixes.length} questions`, Code.Internal);
  }
  scores.results.forEach((r, i) => {
    const want = suffixes[i]!.labels.length;
    if (r.logits.length !== want) {
      throw new ConnectError(`inference returned ${r.logits.length} logits for ${want} labels`, Code.Internal);
    }
    // Inference refuses over-long prompts itself; this keeps a too-long request from ever being
    // answered from a truncated context, whichever worker ran it.
    const tokens = scores.prefixTokens + r.suffixTokens;
    if (maxPositions > 0 && tokens > maxPositions) {
      throw new ConnectError(
        `state and question "${questions[i]!.id}" take ${tokens} tokens; model "${model}" reads at most ${maxPositions}`,
        Code.InvalidArgument,
      );
    }
  });
}

/** InvalidArgument with every problem as a ValidationFailure detail (the gateway answers 422). */
export function validationError(violations: Violation[]): ConnectError {
  const summary = violations.map((v) => `${v.loc.join(".")}: ${v.msg}`).join("; ");
  return new ConnectError(`invalid decision request: ${summary}`, Code.InvalidArgument, undefined, [
    {
      desc: ValidationFailureSchema,
      value: { violations: violations.map((v) => ({ loc: v.loc.map(String), msg: v.msg, type: v.type })) },
    },
  ]);
}
