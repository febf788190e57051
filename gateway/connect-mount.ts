import type { IncomingMessage, ServerResponse } from "node:http";
import { createContextKey, createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { type DecideResponse, DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { type GenerateResponse, InferenceService, type ScoreResponse } from "../gen/tessera/inference/v1/inference_pb.js";
import { MAX_BODY_BYTES } from "./body.js";
import { HttpError, sendError } from "./errors.js";
import { deliveredByGenerate } from "./checkpoints.js";
import { type Charge, type Gate, type GatedCall, RATE_ONLY } from "./gate.js";
import type { ConnectPaths } from "./server.js";

/**
 * What each mounted method costs (gate.ts); a method not listed counts against the rate limit
 * only. A new RPC on the public port declares its charge here.
 */
export const CONNECT_CHARGES: ReadonlyMap<string, Charge> = new Map<string, Charge>([
  [
    `${DecisionService.typeName}/${DecisionService.method.decide.name}`,
    { kind: UsageKind.DECISION, hold: 0, usage: (m) => ({ inputTokens: (m as DecideResponse).usage?.inputTokens ?? 0 }) },
  ],
  [
    `${InferenceService.typeName}/${InferenceService.method.score.name}`,
    { kind: UsageKind.DECISION, hold: 0, usage: (m) => ({ inputTokens: (m as ScoreResponse).inputTokens }) },
  ],
  [
    `${InferenceService.typeName}/${InferenceService.method.generate.name}`,
    {
      kind: UsageKind.TEXT,
      hold: 0,
      usage: (m) => {
        const event = (m as GenerateResponse).event;
        if (event.case !== "finished") return undefined;
        return { promptTokens: event.value.usage?.promptTokens ?? 0, completionTokens: event.value.usage?.completionTokens ?? 0 };
      },
      // A stream cut short: its prompt once `started` went out, and the tokens of the blocks whose deltas did.
      delivered: (m, sofar) => deliveredByGenerate(m as GenerateResponse, sofar),
    },
  ],
]);

/** The gateway's request (the gate's call) a Connect handler runs for. */
const gatedCallKey = createContextKey<GatedCall | undefined>(undefined, { description: "the gateway's request" });

/**
 * Typed clients reach the services on the public port too, so they pass the same gate as the
 * JSON routes (gate.ts): a Bearer key (Unauthenticated without one), the key's per-minute
 * limit, and for calls that use a quota, admission (at least one token left) and settlement
 * of the usage the response reports. A quota can be overshot by the calls in flight when it
 * runs out, as their size is only known afterwards.
 */
export function gateInterceptor(gate: Gate, charges: ReadonlyMap<string, Charge> = CONNECT_CHARGES): Interceptor {
  return (next) => async (req) => {
    const call = req.contextValues.get(gatedCallKey);
    if (call === undefined) throw new Error("a Connect call outside the gateway");
    const charge = charges.get(`${req.service.typeName}/${req.method.name}`) ?? RATE_ONLY;
    return gate.around(charge, () => next(req))(call);
  };
}

export interface ConnectMountDeps {
  /** The services to serve (never accounting: its admin RPCs must not be reachable here). */
  routes: (router: ConnectRouter) => void;
  gate: Gate;
}

/**
 * Serves the mounted services' Connect, gRPC and gRPC-Web paths on the public port, each
 * call through the gate. Unknown paths (accounting's included) answer 404 in the gateway's
 * JSON shape.
 */
export function createConnectMount({ routes, gate }: ConnectMountDeps): ConnectPaths {
  const calls = new WeakMap<IncomingMessage, GatedCall>();
  const adapter = connectNodeAdapter({
    routes,
    // Same bound as the JSON routes; Connect's own default would buffer up to 4 GiB.
    readMaxBytes: MAX_BODY_BYTES,
    interceptors: [gateInterceptor(gate)],
    contextValues: (req) => createContextValues().set(gatedCallKey, calls.get(req as IncomingMessage)),
    fallback: (req, res) => {
      const err = new HttpError(404, "not_found_error", `no service method at ${(req.url ?? "").slice(0, 200)}`, { code: "not_found" });
      sendError(res as ServerResponse, "detail", err);
    },
  });
  return (req, res, call) => {
    calls.set(req, call);
    adapter(req, res);
  };
}
