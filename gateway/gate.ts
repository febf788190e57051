import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type AdmitResponse, type Principal, UsageKind, UsageSchema } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";
import type { RequestPathAccounting } from "../lib/usage/gate.js";
import { type AuthThrottle, createAuthThrottle } from "./auth-throttle.js";
import { bearerKey, MissingApiKey } from "./bearer.js";
import { createDeliveredUsage } from "./checkpoints.js";
import { createPrincipalCache } from "./principal-cache.js";

/** The accounting calls of the request path (never the admin ones). */
export type AccountingGate = RequestPathAccounting;

/** Exact usage of a call, charged by settlement. */
export interface SettleUsage {
  promptTokens?: number;
  completionTokens?: number;
  inputTokens?: number;
}

/**
 * What an endpoint costs: everything the gate needs to know about it.
 *
 * - `kind`: the quota drawn on; `UNSPECIFIED` counts against the per-minute rate only.
 * - `hold`: tokens reserved when the call is admitted, before the endpoint runs (0: the
 *   quota must only have tokens left). `"handler"`: the endpoint admits itself once it knows
 *   its size (`ctx.admit`, e.g. after counting the prompt); the gate authenticates and
 *   refuses a key whose quota has no token left, before the body is read.
 * - `usage`: the exact usage read from the result (a unary answer, or each event of a
 *   stream: the first that reports it is charged). Without it the endpoint settles itself
 *   (`ctx.settle`).
 *
 * - `delivered`: for a stream, the usage of what has reached the client so far, given each
 *   event as it passes and the usage so far: what a stream cut short (the client left, the
 *   generation failed) is charged instead of its final usage.
 *
 * Whatever was admitted against a quota is always settled: with what was delivered, or zero
 * usage when neither the result nor the endpoint reported any (a failure, a client that left).
 */
export interface Charge<M = unknown> {
  kind: UsageKind;
  hold: number | "handler";
  usage?: (message: M) => SettleUsage | undefined;
  delivered?: (message: M, sofar: SettleUsage | undefined) => SettleUsage | undefined;
}

/** Counts against the per-minute rate only. */
export const RATE_ONLY: Charge = { kind: UsageKind.UNSPECIFIED, hold: 0 };

/** One call as the gate sees it; the gateway's request context is one, for REST and Connect alike. */
export interface GatedCall {
  readonly requestId: string;
  /** The Authorization header as sent. */
  readonly authorization: string | undefined;
  /** The client's address (failed authentications are throttled per address). */
  readonly remoteAddress: string | undefined;
  /** The authenticated key, set by the gate. */
  principal: Principal | undefined;
  /** The quota an admission drew on and nothing has settled yet (the gate settles it at the end). */
  pendingSettle: UsageKind | undefined;
  /** Told each admission's answer (the rate-limit headers). */
  admitted(answer: AdmitResponse): void;
}

/** A result as connect-es interceptors see one: a message, or a stream of them. */
export type GateResult<M> = { stream: false; message: M } | { stream: true; message: AsyncIterable<M> };

export type GateHandler<C, R> = (call: C) => Promise<R>;

export interface Gate {
  /**
   * The gate around an endpoint, in the style of a connect-es interceptor: authentication
   * (Bearer key, principal cache), admission (rate + quota reservation), the endpoint,
   * settlement of the exact usage (the stream wrapped so its events are read as they pass).
   */
  around<M, C extends GatedCall, R extends GateResult<M>>(charge: Charge<M>, next: GateHandler<C, R>): GateHandler<C, R>;
  /** Counts the call against the key's per-minute limit and reserves at most `hold` tokens of its quota. */
  admit(call: GatedCall, kind: UsageKind, hold: number): Promise<AdmitResponse>;
  /** Charges the exact usage and releases the rest of the reservation (idempotent by request id). */
  settle(call: GatedCall, kind: UsageKind, usage: SettleUsage): Promise<void>;
  /**
   * Records what an admitted call has delivered so far (a stream's checkpoint), charged by the
   * store's recovery if the process dies before the call settles. Never fails the call.
   */
  checkpoint(call: GatedCall, kind: UsageKind, usage: SettleUsage): void;
}

export interface GateDeps {
  accounting: AccountingGate;
  logger: Logger;
  /** Throttling of failed authentications per address (auth-throttle.ts); default: 30 per minute. */
  authThrottle?: AuthThrottle;
}

function usageOf(usage: SettleUsage) {
  return create(UsageSchema, {
    promptTokens: BigInt(usage.promptTokens ?? 0),
    completionTokens: BigInt(usage.completionTokens ?? 0),
    inputTokens: BigInt(usage.inputTokens ?? 0),
  });
}

const refusesKey = (err: unknown) =>
  err instanceof ConnectError && (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied);

/** The one request gate of the public port (gateway/routes and the mounted Connect services). */
export function createGate({ accounting, logger, authThrottle = createAuthThrottle() }: GateDeps): Gate {
  const principals = createPrincipalCache();
  /** Calls that sent a checkpoint: only their settle deletes a progress entry. */
  const checkpointed = new WeakSet<GatedCall>();

  /** Looks the key up (unless its address is throttled: 429); an unknown key counts against its address. */
  async function authenticate(call: GatedCall, apiKey: string): Promise<Principal | undefined> {
    // A key that authenticated recently is exempt: the throttle is for guesses, not for clients.
    if (principals.get(apiKey) === undefined) authThrottle.check(call.remoteAddress);
    let principal: Principal | undefined;
    try {
      ({ principal } = await accounting.authenticate({ apiKey }));
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.Unauthenticated) authThrottle.failed(call.remoteAddress);
      throw err;
    }
    if (principal !== undefined) principals.set(apiKey, principal);
    return principal;
  }

  async function admit(call: GatedCall, kind: UsageKind, hold: number): Promise<AdmitResponse> {
    if (call.principal === undefined) throw new Error("admit before authentication");
    const answer = await accounting.admit({
      keyId: call.principal.keyId,
      requestId: call.requestId,
      kind,
      reserveTokens: hold > 0 ? BigInt(Math.ceil(hold)) : 0n,
    });
    if (kind !== UsageKind.UNSPECIFIED) call.pendingSettle = kind;
    call.admitted(answer);
    return answer;
  }

  async function settle(call: GatedCall, kind: UsageKind, usage: SettleUsage): Promise<void> {
    if (call.principal === undefined) throw new Error("settle before authentication");
    call.pendingSettle = undefined;
    // Never tied to the client's signal: what was used is charged even if the client left.
    await accounting.settle({
      keyId: call.principal.keyId,
      requestId: call.requestId,
      kind,
      usage: usageOf(usage),
      checkpointed: checkpointed.has(call),
    });
  }

  function checkpoint(call: GatedCall, kind: UsageKind, usage: SettleUsage): void {
    if (call.principal === undefined || call.pendingSettle === undefined) return;
    checkpointed.add(call);
    accounting
      .admit({ keyId: call.principal.keyId, requestId: call.requestId, kind, delivered: usageOf(usage) })
      .catch((err: unknown) => logger.debug({ reqId: call.requestId, err }, "checkpoint not recorded"));
  }

  /** Settlement the gate does itself: a failure is logged, the answer goes out regardless. */
  const settleQuietly = (call: GatedCall, usage: SettleUsage) =>
    call.pendingSettle === undefined
      ? undefined
      : settle(call, call.pendingSettle, usage).catch((err: unknown) => logger.error({ reqId: call.requestId, err }, "settling failed"));

  /**
   * Authenticates from the principal cache when it can, then runs `admission` (an Admit, which
   * checks the key and its account again: a revoked key or a disabled account is refused there,
   * and its cached principal dropped), so a known key costs one accounting call, not two.
   */
  async function admitBefore(call: GatedCall, apiKey: string, admission: () => Promise<unknown>): Promise<void> {
    call.principal = principals.get(apiKey) ?? (await authenticate(call, apiKey));
    try {
      await admission();
    } catch (err) {
      if (refusesKey(err)) principals.delete(apiKey);
      throw err;
    }
  }

  /**
   * Before an endpoint that sizes its own hold reads its body: a key whose quota has no token
   * left is refused here (429 insufficient_quota), so it causes no parsing or counting work.
   * Counts nothing and reserves nothing (the endpoint's own admission does).
   */
  async function quotaLeft(call: GatedCall, kind: UsageKind): Promise<void> {
    await accounting.admit({ keyId: call.principal!.keyId, requestId: call.requestId, kind, checkOnly: true });
  }

  async function* settledStream<M>(call: GatedCall, charge: Charge<M>, events: AsyncIterable<M>): AsyncIterable<M> {
    // What the events passed on so far amount to: charged if the stream ends without its usage,
    // and recorded as it grows, for the case where the process dies first.
    const kind = call.pendingSettle;
    const delivered = createDeliveredUsage(
      charge.delivered ?? (() => undefined),
      (usage) => kind !== undefined && checkpoint(call, kind, usage),
    );
    try {
      for await (const event of events) {
        if (call.pendingSettle !== undefined) {
          const usage = charge.usage?.(event);
          if (usage !== undefined) await settleQuietly(call, usage);
          else delivered.passed(event);
        }
        yield event;
      }
    } finally {
      delivered.stop();
      await settleQuietly(call, delivered.usage ?? {});
    }
  }

  function around<M, C extends GatedCall, R extends GateResult<M>>(charge: Charge<M>, next: GateHandler<C, R>): GateHandler<C, R> {
    return async (call) => {
      const apiKey = bearerKey(call.authorization);
      if (apiKey === undefined) throw new MissingApiKey();
      const { kind, hold } = charge;
      if (hold !== "handler") await admitBefore(call, apiKey, () => admit(call, kind, hold));
      else if (kind !== UsageKind.UNSPECIFIED) await admitBefore(call, apiKey, () => quotaLeft(call, kind));
      // No Admit follows at once (the handler admits later, if at all): the key is looked up.
      else call.principal = await authenticate(call, apiKey);
      let result: R;
      try {
        result = await next(call);
      } catch (err) {
        await settleQuietly(call, {});
        throw err;
      }
      if (result.stream) {
        if (call.pendingSettle === undefined) return result;
        return { ...result, message: settledStream(call, charge, result.message) };
      }
      const usage = charge.usage?.(result.message);
      await settleQuietly(call, usage ?? {});
      return result;
    };
  }

  return { around, admit, settle, checkpoint };
}
