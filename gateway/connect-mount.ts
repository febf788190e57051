import type { IncomingMessage, ServerResponse } from "node:http";
import { create } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type ConnectRouter,
  type Interceptor,
  type StreamResponse,
} from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { UsageKind, UsageSchema } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService, type DecideResponse } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService, type GenerateResponse, type ScoreResponse } from "../gen/tessera/inference/v1/inference_pb.js";
import type { Logger } from "../lib/logger.js";
import { MAX_BODY_BYTES } from "./body.js";
import { errorBody, HttpError } from "./errors.js";
import { REQUEST_ID_HEADER, sendJson, type AccountingGate } from "./server.js";

/** The gateway's request id, handed to the Connect handlers and the auth interceptor. */
export const requestIdKey = createContextKey<string>("", { description: "x-service-request-id" });

const requestIds = new WeakMap<IncomingMessage, string>();

/** Which quota a direct call draws on; everything not listed only counts against the rate limit. */
function chargeOf(service: string, method: string): UsageKind {
  if (service === DecisionService.typeName && method === "Decide") return UsageKind.DECISION;
  if (service === InferenceService.typeName && method === "Score") return UsageKind.DECISION;
  if (service === InferenceService.typeName && method === "Generate") return UsageKind.TEXT;
  return UsageKind.UNSPECIFIED;
}

/**
 * Typed clients reach the services on the public port too, so they pass the same gate as
 * HTTP callers: a Bearer key (Unauthenticated without one), the key's per-minute limit,
 * and for calls that use a quota, admission (at least one token left) and settlement of
 * the usage the response reports. A quota can be overshot by the calls in flight when it
 * runs out, as their size is only known afterwards.
 */
export function accountingInterceptor(
  accounting: AccountingGate,
  logger: Logger,
  onAuthenticated: (requestId: string, keyId: string) => void = () => undefined,
): Interceptor {
  return (next) => async (req) => {
    const requestId = req.contextValues.get(requestIdKey);
    const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.header.get("authorization") ?? "");
    if (match === null) throw new ConnectError("no API key sent; send the header Authorization: Bearer <key>", Code.Unauthenticated);
    const { principal } = await accounting.authenticate({ apiKey: match[1]! }, { signal: req.signal });
    const keyId = principal!.keyId;
    onAuthenticated(requestId, keyId);
    const kind = chargeOf(req.service.typeName, req.method.name);
    await accounting.admit({ keyId, requestId, kind, reserveTokens: 0n }, { signal: req.signal });
    const settle = (usage: { promptTokens?: number; completionTokens?: number; inputTokens?: number }) =>
      accounting
        .settle({
          keyId,
          requestId,
          kind,
          usage: create(UsageSchema, {
            promptTokens: BigInt(usage.promptTokens ?? 0),
            completionTokens: BigInt(usage.completionTokens ?? 0),
            inputTokens: BigInt(usage.inputTokens ?? 0),
          }),
        })
        .catch((err: unknown) => logger.error({ reqId: requestId, keyId, err }, "settling a Connect call failed"));

    const res = await next(req);
    if (kind === UsageKind.UNSPECIFIED) return res;
    if (!res.stream) {
      const inputTokens =
        res.service.typeName === DecisionService.typeName
          ? ((res.message as DecideResponse).usage?.inputTokens ?? 0)
          : (res.message as ScoreResponse).inputTokens;
      await settle({ inputTokens });
      return res;
    }
    const stream = res as StreamResponse;
    return {
      ...stream,
      message: (async function* () {
        for await (const event of stream.message as AsyncIterable<GenerateResponse>) {
          if (event.event.case === "finished") {
            const usage = event.event.value.usage;
            await settle({ promptTokens: usage?.promptTokens ?? 0, completionTokens: usage?.completionTokens ?? 0 });
          }
          yield event;
        }
      })(),
    } as StreamResponse;
  };
}

export interface ConnectMountDeps {
  /** The services to serve (never accounting: its admin RPCs must not be reachable here). */
  routes: (router: ConnectRouter) => void;
  accounting: AccountingGate;
  logger: Logger;
}

/**
 * Serves the mounted services' Connect, gRPC and gRPC-Web paths on the public port.
 * Unknown paths (accounting's included) answer 404 in the gateway's JSON shape.
 */
export function createConnectMount({ routes, accounting, logger }: ConnectMountDeps): ConnectMount {
  // Key ids of calls in flight, by request id, for the gateway's log line.
  const keyIds = new Map<string, string>();
  const adapter = connectNodeAdapter({
    routes,
    // Same bound as the JSON routes; Connect's own default would buffer up to 4 GiB.
    readMaxBytes: MAX_BODY_BYTES,
    interceptors: [accountingInterceptor(accounting, logger, (requestId, keyId) => keyIds.set(requestId, keyId))],
    contextValues: (req) => createContextValues().set(requestIdKey, requestIds.get(req as IncomingMessage) ?? ""),
    fallback: (req, res) => {
      const err = new HttpError(404, "not_found_error", `no service method at ${(req.url ?? "").slice(0, 200)}`, { code: "not_found" });
      const { status, body } = errorBody("detail", err);
      sendJson(res as ServerResponse, status, body);
    },
  });
  const mount = (req: IncomingMessage, res: ServerResponse) => {
    requestIds.set(req, String(res.getHeader(REQUEST_ID_HEADER) ?? ""));
    adapter(req, res);
  };
  return Object.assign(mount, {
    takeKeyId(requestId: string) {
      const keyId = keyIds.get(requestId);
      keyIds.delete(requestId);
      return keyId;
    },
  });
}

/** The Connect paths' handler; `takeKeyId` tells (once) which key a finished call used. */
export type ConnectMount = ((req: IncomingMessage, res: ServerResponse) => void) & {
  takeKeyId(requestId: string): string | undefined;
};
