import type { IncomingMessage, ServerResponse } from "node:http";
import { type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type ConnectRouter,
  type Interceptor,
  type StreamRequest,
  type UnaryRequest,
} from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { CLIENT_HEADER } from "../lib/client-header.js";
import { UsageKind } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { type DecideResponse, DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { type GenerateResponse, InferenceService, type ScoreResponse } from "../gen/tessera/inference/v1/inference_pb.js";
import type { HoldSizer } from "./admission.js";
import { MAX_BODY_BYTES } from "./body.js";
import { MAX_STATE_CHARS } from "../lib/decision-types/rules.js";
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
 * limit, and for calls that use a quota, admission and settlement of the usage the response
 * reports. A method with a hold sizer (admission.ts) is admitted as its JSON route is: a key
 * with no token left is refused first, then the request is sized and the hold reserved
 * (resource_exhausted when it does not fit), so parallel calls cannot overdraw a quota.
 */
export function gateInterceptor(
  gate: Gate,
  holds: ReadonlyMap<string, HoldSizer> = new Map(),
  charges: ReadonlyMap<string, Charge> = CONNECT_CHARGES,
): Interceptor {
  return (next) => async (req) => {
    const call = req.contextValues.get(gatedCallKey);
    if (call === undefined) throw new Error("a Connect call outside the gateway");
    const name = `${req.service.typeName}/${req.method.name}`;
    const charge = charges.get(name) ?? RATE_ONLY;
    const sizer = holds.get(name);
    // Whose call it is, for the services that share by client: the key's account, never what the caller sent.
    const asClient = (gated: GatedCall) => req.header.set(CLIENT_HEADER, gated.principal?.accountId ?? "");
    if (sizer === undefined) {
      return gate.around(charge, (gated) => {
        asClient(gated);
        return next(req);
      })(call);
    }
    return gate.around({ ...charge, hold: "handler" }, async (gated) => {
      asClient(gated);
      const sized = await withInput(req);
      const admit = (kind: UsageKind, tokens: number) => gate.admit(gated, kind, tokens);
      await sizer(admit, sized.message, requestBytes(req, sized.message), req.signal);
      return next(sized.req);
    })(call);
  };
}

/** The call's one input message (a server stream's too), and the request to pass on with it. */
async function withInput<I extends DescMessage, O extends DescMessage>(
  req: UnaryRequest<I, O> | StreamRequest<I, O>,
): Promise<{ message: MessageShape<I>; req: UnaryRequest<I, O> | StreamRequest<I, O> }> {
  if (!req.stream) return { message: req.message, req };
  const messages: MessageShape<I>[] = [];
  for await (const m of req.message) messages.push(m);
  if (messages.length !== 1) throw new ConnectError("expected exactly one request message", Code.InvalidArgument);
  return { message: messages[0]!, req: { ...req, message: createAsyncIterable(messages) } };
}

/** The request's size as sent: its Content-Length, else its binary encoding (gRPC streams send none). */
function requestBytes(req: UnaryRequest | StreamRequest, message: MessageShape<DescMessage>): number {
  const declared = Number(req.header.get("content-length"));
  if (Number.isFinite(declared) && declared > 0) return declared;
  return toBinary(req.method.input, message).byteLength;
}

export interface ConnectMountDeps {
  /** The services to serve (never accounting: its admin RPCs must not be reachable here). */
  routes: (router: ConnectRouter) => void;
  gate: Gate;
  /** How the calls that draw on a quota size their hold (admission.ts connectHolds). */
  holds?: ReadonlyMap<string, HoldSizer>;
}

/**
 * Serves the mounted services' Connect, gRPC and gRPC-Web paths on the public port, each
 * call through the gate. Unknown paths (accounting's included) answer 404 in the gateway's
 * JSON shape.
 */
export function createConnectMount({ routes, gate, holds }: ConnectMountDeps): ConnectPaths {
  const calls = new WeakMap<IncomingMessage, GatedCall>();
  const adapter = (readMaxBytes: number) =>
    connectNodeAdapter({
      routes,
      readMaxBytes,
      interceptors: [gateInterceptor(gate, holds)],
      contextValues: (req) => createContextValues().set(gatedCallKey, calls.get(req as IncomingMessage)),
      fallback: (req, res) => {
        const err = new HttpError(404, "not_found_error", `no service method at ${(req.url ?? "").slice(0, 200)}`, {
          code: "not_found",
        });
        sendError(res as ServerResponse, "detail", err);
      },
    });
  // Same bound as the JSON routes; Connect's own default would buffer up to 4 GiB.
  const anyCall = adapter(MAX_BODY_BYTES);
  const decisionCall = adapter(CONNECT_DECISION_MAX_BYTES);
  return (req, res, call) => {
    calls.set(req, call);
    const path = (req.url ?? "").split("?")[0]!;
    (DECISION_PATHS.some((p) => path.endsWith(p)) ? decisionCall : anyCall)(req, res);
  };
}

/**
 * Most bytes of a Decide or Score request over Connect, gRPC or gRPC-Web: twice the state's limit
 * (MAX_STATE_CHARS, 1 MiB), room for a state at its limit and the questions. Connect parses the
 * message on the event loop, at about 0.3 s a megabyte for a state of many small values (fromJson
 * and fromBinary alike), before any check of the state can run; a request over this is refused
 * resource_exhausted as it is read, before it is parsed. The JSON route (/v1/systemone) takes up
 * to MAX_BODY_BYTES: its body is parsed and checked on the body worker.
 */
export const CONNECT_DECISION_MAX_BYTES = 2 * MAX_STATE_CHARS;

const DECISION_PATHS = [
  `/${DecisionService.typeName}/${DecisionService.method.decide.name}`,
  `/${InferenceService.typeName}/${InferenceService.method.score.name}`,
];
