import { Code, ConnectError } from "@connectrpc/connect";
import { UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { CasRetriesExhaustedError } from "../../lib/store/index.js";
import { invalidArgument } from "./errors.js";
import { isWellFormedId } from "./ids.js";
import { quotaKindFromProto } from "./records.js";

// The checks of accounting requests' fields, each refusing with InvalidArgument.

const MAX_NAME_LENGTH = 200;
const MAX_REQUEST_ID_LENGTH = 1024;

export function requireId(id: string, field: string): void {
  if (id === "") throw invalidArgument(`${field} is required.`);
  if (!isWellFormedId(id)) throw invalidArgument(`${field} is malformed.`);
}

export function requireRequestId(requestId: string): void {
  if (requestId === "") throw invalidArgument("request_id is required.");
  if (requestId.length > MAX_REQUEST_ID_LENGTH) throw invalidArgument(`request_id is longer than ${MAX_REQUEST_ID_LENGTH} characters.`);
}

export function requireKind(kind: UsageKind) {
  if (kind === UsageKind.UNSPECIFIED) return undefined;
  const quotaKind = quotaKindFromProto(kind);
  if (!quotaKind) throw invalidArgument(`Unknown usage kind ${kind}.`);
  return quotaKind;
}

export function requireName(name: string): string {
  if (name.length > MAX_NAME_LENGTH) throw invalidArgument(`name is longer than ${MAX_NAME_LENGTH} characters.`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this rejects
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalidArgument("name must not contain control characters.");
  return name;
}

const MAX_COUNT = BigInt(Number.MAX_SAFE_INTEGER);

export function toCount(value: bigint, field: string): number {
  if (value > MAX_COUNT) throw invalidArgument(`${field} is too large.`);
  return Number(value);
}

/** Store contention the retries could not resolve becomes a retryable Unavailable. */
export async function guardStore<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof CasRetriesExhaustedError)
      throw new ConnectError("Accounting store is busy; retry.", Code.Unavailable, undefined, undefined, err);
    throw err;
  }
}
