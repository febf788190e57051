import { Code, ConnectError } from "@connectrpc/connect";
import { QuotaExceededSchema, RateLimitedSchema, type UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";

export const invalidArgument = (message: string) => new ConnectError(message, Code.InvalidArgument);
export const notFound = (message: string) => new ConnectError(message, Code.NotFound);
export const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);
export const permissionDenied = (message: string) => new ConnectError(message, Code.PermissionDenied);

export function rateLimited(limit: number, retryAfterSeconds: number): ConnectError {
  return new ConnectError(
    `Rate limit reached: ${limit} requests per minute for this key. Retry in ${retryAfterSeconds} s.`,
    Code.ResourceExhausted,
    undefined,
    [{ desc: RateLimitedSchema, value: { limit, retryAfterSeconds } }],
  );
}

export function quotaExceeded(kind: UsageKind, kindName: string, quota: number, available: number, hold = 0): ConnectError {
  const message =
    available > 0 && hold > available
      ? `This request must hold ${hold} tokens of the ${kindName} quota until it is charged, and only ${available} of ${quota} are left.`
      : `The ${kindName} quota is used up: ${available} of ${quota} tokens left.`;
  return new ConnectError(message, Code.ResourceExhausted, undefined, [
    { desc: QuotaExceededSchema, value: { kind, quotaTokens: BigInt(quota), availableTokens: BigInt(available) } },
  ]);
}
