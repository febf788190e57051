import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { CLIENT_HEADER } from "../../lib/client-header.js";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { DecideRequest, DecideResponse, DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { admitDecisionHold, decisionHold, questionCount } from "../admission.js";
import { HttpError } from "../errors.js";
import type { DecisionBody } from "../body-prepare.js";
import { decisionResponseToJson } from "../mappers/decision.js";
import type { Route } from "../route.js";

export interface SystemoneRouteDeps {
  decision: Pick<Client<typeof DecisionService>, "decide">;
  /** The inference workers' cap on a decision's work (TESSERA_MAX_DECISION_WORK_TOKENS): input tokens never pass it by more than a block. */
  maxDecisionWorkTokens?: number;
}

/**
 * POST /v1/systemone: typed decisions. The key is admitted once the body is valid, holding an
 * upper bound of the input tokens of its decision quota (429 insufficient_quota when that does
 * not fit), and charged the exact input tokens afterwards.
 */
export function systemoneRoute({ decision, maxDecisionWorkTokens }: SystemoneRouteDeps): Route<DecisionBody> {
  return {
    method: "POST",
    path: "/v1/systemone",
    errorStyle: "detail",
    charge: { kind: UsageKind.DECISION, hold: "handler" },
    body: "json",
    prepareBody: "decision",
    async handle(ctx) {
      const decide = async (request: DecideRequest): Promise<DecideResponse> => {
        try {
          return await decision.decide(request, { signal: ctx.signal, headers: { [CLIENT_HEADER]: ctx.principal?.accountId ?? "" } });
        } catch (err) {
          if (err instanceof ConnectError && err.code === Code.NotFound) {
            throw new HttpError(400, "invalid_request_error", err.rawMessage, { code: "model_not_found", param: "model" });
          }
          throw err;
        }
      };
      const parsed = ctx.body;
      if (!parsed.ok) {
        // An invalid body still counts against the per-minute limit.
        await ctx.admit(UsageKind.UNSPECIFIED, 0);
        throw HttpError.invalid(parsed.violations);
      }
      parsed.request.requestId = ctx.requestId;
      ctx.log.model = parsed.request.model;
      // Reserve an upper bound of the input tokens, so that parallel requests cannot overdraw
      // the quota; the exact count is charged when the answer is known. When the bound does not
      // fit what is left, the decision is tokenized (no model run) and the exact count held:
      // a key with Q tokens left can run any decision that costs at most Q.
      const bound = decisionHold(parsed.bodyBytes, questionCount(parsed.request), maxDecisionWorkTokens);
      await admitDecisionHold(
        (kind, tokens) => ctx.admit(kind, tokens),
        bound,
        async () => {
          const counted = await decide({ ...parsed.request, countOnly: true });
          return Number(counted.usage?.inputTokens ?? 0);
        },
      );
      const response = await decide(parsed.request);
      await ctx.settle(UsageKind.DECISION, { inputTokens: response.usage?.inputTokens ?? 0 });
      ctx.log["answeredBy"] = response.model;
      return { body: decisionResponseToJson(response) };
    },
  };
}
