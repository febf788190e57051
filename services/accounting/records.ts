import { create } from "@bufbuild/protobuf";
import {
  AccountInfoSchema,
  AccountStatus,
  KeyInfoSchema,
  UsageKind,
  type AccountInfo,
  type KeyInfo,
} from "../../gen/tessera/accounting/v1/accounting_pb.js";
import type { KvBucket, Store } from "../../lib/store/index.js";

/** What is stored for a key. The secret is not: only its SHA-256, in hex. */
export interface KeyRecord {
  id: string;
  accountId: string;
  name: string;
  hash: string;
  createdAt: number;
  revokedAt: number | null;
  /** Requests per minute; 0 means the service default. */
  rpm: number;
}

export type AccountState = "active" | "disabled" | "email_unverified";

export interface AccountRecord {
  id: string;
  status: AccountState;
  /** Tokens; 0 means unlimited. */
  textQuota: number;
  decisionQuota: number;
  createdAt: number;
}

export type QuotaKind = "text" | "decision";

/** A request's hold on its account's quota until it settles or the hold expires. */
export interface Reservation {
  k: QuotaKind;
  n: number;
  /** Expires at (ms since the epoch). */
  x: number;
  /** The gateway instance that admitted the request (distributed mode; see sweep.ts). */
  g?: string;
}

/** One account's quota counters: kept apart from the account so that admin edits and the hot counters do not collide. */
export interface QuotaCounters {
  textUsed: number;
  decisionUsed: number;
  /** By request id. */
  res: Record<string, Reservation>;
}

/** The usage of one settled request, as the ledger and the settle marker hold it. */
export interface UsageEntry {
  prompt: number;
  completion: number;
  decisionInput: number;
}

/** A key's usage summed over one UTC day. */
export interface UsageDayRecord extends UsageEntry {
  requests: number;
}

/** One fixed one-minute window of a key's request count. */
export interface RateWindow {
  /** Window start (ms since the epoch, a multiple of 60 000). */
  w: number;
  n: number;
}

/** Written first by Settle: it decides idempotency and says which ledger entry to write. */
export interface SettledMarker extends UsageEntry {
  at: number;
  day: string;
  /** The key charged (markers written before this field have none). */
  keyId?: string;
}

/** The last checkpoint of a request in flight (Admit `delivered`): charged by recovery if it never settles. */
export interface ProgressEntry extends UsageEntry {
  at: number;
  keyId: string;
  /** The gateway instance streaming it (distributed mode; see sweep.ts). */
  gateway?: string;
}

/** Checkpoints of requests that never settled and that no recovery charged (no gateway instance recorded) expire after a day. */
export const PROGRESS_RETENTION_MS = 24 * 60 * 60_000;

export interface AccountingBuckets {
  /** KeyRecord by key id. */
  keys: KvBucket<KeyRecord>;
  /** Key id by the hex SHA-256 of the secret: how Authenticate finds a key. */
  keyHashes: KvBucket<{ keyId: string }>;
  /** AccountRecord by account id. */
  accounts: KvBucket<AccountRecord>;
  /** QuotaCounters by account id. */
  quotas: KvBucket<QuotaCounters>;
  /** UsageEntry by `<key id>.<YYYY-MM-DD>.<request key>`: one entry per settled request. */
  ledger: KvBucket<UsageEntry>;
  /** Settle's idempotency markers by request key (see ids.requestKey); they expire. */
  settled: KvBucket<SettledMarker>;
  /** ProgressEntry by request key, while its request is in flight. */
  progress: KvBucket<ProgressEntry>;
}

/** How long a settled request id is remembered: a repeat settle later than this counts again. */
export const SETTLED_RETENTION_MS = 48 * 3600_000;

export function openBuckets(store: Store, settledRetentionMs: number): AccountingBuckets {
  return {
    keys: store.bucket("accounting_keys"),
    keyHashes: store.bucket("accounting_key_hashes"),
    accounts: store.bucket("accounting_accounts"),
    quotas: store.bucket("accounting_quotas"),
    ledger: store.bucket("accounting_ledger_entries"),
    settled: store.bucket("accounting_settled", { ttlMs: settledRetentionMs }),
    progress: store.bucket("accounting_progress", { ttlMs: PROGRESS_RETENTION_MS }),
  };
}

export const ledgerKey = (keyId: string, day: string, requestKey: string) => `${keyId}.${day}.${requestKey}`;
export const ledgerPrefix = (keyId: string) => `${keyId}.`;

export const emptyCounters = (): QuotaCounters => ({ textUsed: 0, decisionUsed: 0, res: {} });

const STATUS_TO_PROTO: Record<AccountState, AccountStatus> = {
  active: AccountStatus.ACTIVE,
  disabled: AccountStatus.DISABLED,
  email_unverified: AccountStatus.EMAIL_UNVERIFIED,
};

export const statusToProto = (status: AccountState) => STATUS_TO_PROTO[status];

export function statusFromProto(status: AccountStatus): AccountState | undefined {
  switch (status) {
    case AccountStatus.ACTIVE:
      return "active";
    case AccountStatus.DISABLED:
      return "disabled";
    case AccountStatus.EMAIL_UNVERIFIED:
      return "email_unverified";
    default:
      return undefined;
  }
}

export function quotaKindFromProto(kind: UsageKind): QuotaKind | undefined {
  if (kind === UsageKind.TEXT) return "text";
  if (kind === UsageKind.DECISION) return "decision";
  return undefined;
}

export const quotaKindToProto = (kind: QuotaKind) => (kind === "text" ? UsageKind.TEXT : UsageKind.DECISION);

export function keyInfo(key: KeyRecord, defaultRpm: number): KeyInfo {
  return create(KeyInfoSchema, {
    keyId: key.id,
    accountId: key.accountId,
    name: key.name,
    createdUnixMs: BigInt(key.createdAt),
    revoked: key.revokedAt !== null,
    requestsPerMinute: key.rpm || defaultRpm,
  });
}

/** Reservations still holding quota at `now`, summed per kind. */
export function reservedTokens(counters: QuotaCounters, now: number): Record<QuotaKind, number> {
  const sum = { text: 0, decision: 0 };
  for (const r of Object.values(counters.res)) if (r.x > now) sum[r.k] += r.n;
  return sum;
}

export function accountInfo(account: AccountRecord, counters: QuotaCounters, now: number): AccountInfo {
  const reserved = reservedTokens(counters, now);
  return create(AccountInfoSchema, {
    accountId: account.id,
    status: statusToProto(account.status),
    textQuotaTokens: BigInt(account.textQuota),
    decisionQuotaTokens: BigInt(account.decisionQuota),
    textUsedTokens: BigInt(counters.textUsed),
    decisionUsedTokens: BigInt(counters.decisionUsed),
    textReservedTokens: BigInt(reserved.text),
    decisionReservedTokens: BigInt(reserved.decision),
  });
}
