import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { DecideResponse, DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { HttpError } from "../errors.js";
import { decisionResponseToJson, parseDecisionRequest } from "../mappers/decision.js";
import type { Route } from "../route.js";

export interface SystemoneRouteDeps {
  decision: Pick<Client<typeof DecisionService>, "decide">;
}

/**
 * POST /v1/systemone: typed decisions. The key is admitted before the body is checked, so
 * invalid requests count against the per-minute limit like any other; the decision quota
 * must have tokens left and is charged the exact input tokens afterwards.
 */
export function systemoneRoute({ decision }: SystemoneRouteDeps): Route {
  return {
    method: "POST",
    path: "/v1/systemone",
    errorStyle: "detail",
    charge: { kind: UsageKind.DECISION, hold: 0 },
    body: "json",
    async handle(ctx) {
      const parsed = parseDecisionRequest(ctx.body, ctx.requestId);
      if (!parsed.ok) throw HttpError.invalid(parsed.violations);
      ctx.log.model = parsed.request.model;
      let response: DecideResponse;
      try {
        response = await decision.decide(parsed.request, { signal: ctx.signal });
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.NotFound) {
          throw new HttpError(400, "invalid_request_error", err.rawMessage, { code: "model_not_found", param: "model" });
        }
        throw err;
      }
      await ctx.settle(UsageKind.DECISION, { inputTokens: response.usage?.inputTokens ?? 0 });
      ctx.log["answeredBy"] = response.model;
      return { body: decisionResponseToJson(response) };
    },
  };
}
