import { timingSafeEqual } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Logger } from "../../lib/logger.js";
import {
  type AccountingService,
  type AdmitRequest,
  type AdmitResponse,
  AdmitResponseSchema,
  AuthenticateResponseSchema,
  CreateKeyResponseSchema,
  EnsureKeyResponseSchema,
  GetAccountResponseSchema,
  GetUsageResponseSchema,
  ListKeysResponseSchema,
  RevokeKeyResponseSchema,
  SetAccountStatusResponseSchema,
  SetLimitsResponseSchema,
  SettleResponseSchema,
  UsageDaySchema,
} from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { RevisionConflictError, type Store } from "../../lib/store/index.js";
import { Directory } from "./directory.js";
import { invalidArgument, notFound, permissionDenied, quotaExceeded, rateLimited, unauthenticated } from "./errors.js";
import { hashApiKey, isWellFormedApiKey, newApiKey, requestKey } from "./ids.js";
import { guardStore, requireId, requireKind, requireName, requireRequestId, toCount } from "./request-checks.js";
import { isUtcDay, readUsage, utcDay } from "./ledger.js";
import { settleOnce } from "./settle-once.js";
import { chargeQuota, reserveQuota } from "./quota.js";
import { RATE_BUCKET, type RateDecision, type RateLimiter, sharedRateLimiter } from "./rate-limit.js";
import {
  accountInfo,
  emptyCounters,
  reservedTokens,
  keyInfo,
  openBuckets,
  SETTLED_RETENTION_MS,
  statusFromProto,
  type AccountRecord,
  type KeyRecord,
  type ProgressEntry,
  type QuotaKind,
} from "./records.js";

export interface AccountingDeps {
  /** Durable state: keys, accounts, quota counters, the ledger, settle markers. */
  store: Store;
  /** The per-minute limiter; defaults to compare-and-set on `store`. Embedded mode passes a process-local one. */
  rateLimiter?: RateLimiter;
  clock?: () => number;
  logger: Logger;
  /** The limit of keys whose own limit is 0. 0 here means no limit. */
  defaultRequestsPerMinute: number;
  /** How long key and account records are cached on the request path (default 5 s). */
  cacheTtlMs?: number;
  /** How long an unsettled reservation holds quota (default 15 min). */
  reservationTtlMs?: number;
  /** How long a settled request id is remembered for idempotency (default 48 h). */
  settledRetentionMs?: number;
}

export type AccountingServiceImpl = ServiceImpl<typeof AccountingService>;

const UNLIMITED_REMAINING = 0xffff_ffff;

/**
 * Rules this implementation settles on, beyond the proto's comments:
 * - Rate limit: fixed one-minute windows aligned to the clock minute (see rate-limit.ts).
 * - Order: Admit checks the rate limit first, then the quota; a request refused for quota
 *   has still used one request of its minute (it reached the service, and a client that
 *   hammers a spent quota is throttled like any other).
 * - Reservations are only held against a finite quota; they expire after
 *   `reservationTtlMs` (a request that never settles stops holding quota then).
 * - Settle: a marker per (key, request id), holding the day and the usage, is created first
 *   and decides idempotency. The ledger holds one entry per request, keyed by it, so the
 *   ledger is exact even when a replica dies mid-settle: the redelivered event writes the
 *   missing entry, never a second one. The quota is charged only by the settle that created
 *   the marker (at most once; a crash right before it leaves that request's quota charge to
 *   the reservation's expiry). Markers are kept `settledRetentionMs`; a settle of a request
 *   id never admitted still charges.
 */
export function createAccountingService(deps: AccountingDeps): AccountingServiceImpl {
  const clock = deps.clock ?? Date.now;
  const log = deps.logger.child({ component: "accounting" });
  const defaultRpm = deps.defaultRequestsPerMinute;
  const reservationTtlMs = deps.reservationTtlMs ?? 15 * 60_000;
  const buckets = openBuckets(deps.store, deps.settledRetentionMs ?? SETTLED_RETENTION_MS);
  const rates = deps.rateLimiter ?? sharedRateLimiter(deps.store.bucket(RATE_BUCKET));
  const directory = new Directory(buckets, clock, deps.cacheTtlMs ?? 5000);

  // The request path (Authenticate, Admit) reads keys and accounts from the cache without
  // awaiting when it can: each await is a trip through the microtask queue, on every request.
  function checkAccount(account: AccountRecord | undefined): AccountRecord {
    if (!account) throw permissionDenied("The account of this API key does not exist.");
    if (account.status === "disabled") throw permissionDenied("The account is disabled.");
    if (account.status === "email_unverified") {
      throw permissionDenied("The account's e-mail address is not verified.");
    }
    return account;
  }

  function checkKey(key: KeyRecord | undefined): KeyRecord {
    if (!key) throw unauthenticated("Unknown API key.");
    if (key.revokedAt !== null) throw unauthenticated("The API key has been revoked.");
    return key;
  }

  async function existingKey(keyId: string): Promise<KeyRecord> {
    requireId(keyId, "key_id");
    const key = await directory.keyById(keyId, true);
    if (!key) throw notFound(`No key ${keyId}.`);
    return key;
  }

  async function existingAccount(accountId: string): Promise<AccountRecord> {
    requireId(accountId, "account_id");
    const account = await directory.account(accountId, true);
    if (!account) throw notFound(`No account ${accountId}.`);
    return account;
  }

  async function loadAndAdmit(req: AdmitRequest): Promise<AdmitResponse> {
    const key = checkKey(directory.cachedKey(req.keyId) ?? (await directory.keyById(req.keyId)));
    const account = checkAccount(directory.cachedAccount(key.accountId) ?? (await directory.account(key.accountId)));
    return admitWith(req, key, account);
  }

  /** Admit for a key and account already checked: a value when nothing had to wait, else a promise. */
  function admitWith(req: AdmitRequest, key: KeyRecord, account: AccountRecord): AdmitResponse | Promise<AdmitResponse> {
    const kind = requireKind(req.kind);
    if (req.gatewayInstance !== "") requireId(req.gatewayInstance, "gateway_instance");
    if (req.checkOnly) return checkQuotaLeft(req, account, kind);
    if (req.delivered !== undefined) return checkpoint(req, key);
    if (kind !== undefined) requireRequestId(req.requestId);
    const admission: Admission = { req, key, account, kind, reserve: toCount(req.reserveTokens, "reserve_tokens"), now: clock() };
    const limit = key.rpm || defaultRpm;
    if (limit <= 0) {
      const resetSeconds = Math.max(1, Math.ceil((60_000 - (admission.now % 60_000)) / 1000));
      return reserveAndAnswer(admission, { admitted: true, remaining: UNLIMITED_REMAINING, resetSeconds });
    }
    const rate = rates.take(key.id, limit, admission.now);
    if (rate instanceof Promise) return guardStore(rate).then((decided) => reserveAndAnswer(admission, checkRate(decided, limit)));
    return reserveAndAnswer(admission, checkRate(rate, limit));
  }

  /** Admit's quota reservation (finite quotas only, so a promise only then), then the answer. */
  function reserveAndAnswer(
    { req, key, account, kind, reserve, now }: Admission,
    rate: RateDecision,
  ): AdmitResponse | Promise<AdmitResponse> {
    const answer = admitResponse(rate.remaining, rate.resetSeconds);
    const quota = kind === undefined ? 0 : quotaOf(account, kind);
    if (kind === undefined || quota <= 0) return answer;
    const reservation = reserveQuota(buckets.quotas, account.id, {
      requestKey: requestKey(key.id, req.requestId),
      kind,
      tokens: reserve,
      quota,
      now,
      reservationTtlMs,
      holder: req.gatewayInstance,
    });
    return guardStore(reservation).then((outcome) => {
      if (!outcome.ok) throw quotaExceeded(req.kind, kind === "text" ? "text-generation" : "decision", quota, outcome.available, reserve);
      return answer;
    });
  }

  /** Admit's `delivered`: the request's latest checkpoint, for recovery to charge if it never settles. */
  async function checkpoint(req: AdmitRequest, key: KeyRecord): Promise<AdmitResponse> {
    requireRequestId(req.requestId);
    const usage = req.delivered!;
    const entry: ProgressEntry = {
      at: clock(),
      keyId: key.id,
      prompt: toCount(usage.promptTokens, "delivered.prompt_tokens"),
      completion: toCount(usage.completionTokens, "delivered.completion_tokens"),
      decisionInput: toCount(usage.inputTokens, "delivered.input_tokens"),
      ...(req.gatewayInstance ? { gateway: req.gatewayInstance } : {}),
    };
    await guardStore(buckets.progress.put(requestKey(key.id, req.requestId), entry));
    return admitResponse(0, 0);
  }

  /** Admit's check_only: refused when the quota has no token left (used plus held); nothing counted or reserved. */
  async function checkQuotaLeft(req: AdmitRequest, account: AccountRecord, kind: QuotaKind | undefined): Promise<AdmitResponse> {
    const answer = admitResponse(0, 0);
    const quota = kind === undefined ? 0 : quotaOf(account, kind);
    if (kind === undefined || quota <= 0) return answer;
    const counters = (await guardStore(buckets.quotas.get(account.id)))?.value ?? emptyCounters();
    const now = clock();
    const used = kind === "text" ? counters.textUsed : counters.decisionUsed;
    const available = Math.max(0, quota - used - reservedTokens(counters, now)[kind]);
    if (available === 0) throw quotaExceeded(req.kind, kind === "text" ? "text-generation" : "decision", quota, 0);
    return answer;
  }

  const accountView = async (account: AccountRecord) =>
    accountInfo(account, (await buckets.quotas.get(account.id))?.value ?? emptyCounters(), clock());

  const impl: AccountingServiceImpl = {
    async authenticate(req) {
      if (!isWellFormedApiKey(req.apiKey)) throw unauthenticated("Invalid API key.");
      const hashHex = hashApiKey(req.apiKey);
      const key = directory.cachedKeyByHash(hashHex) ?? (await directory.keyByHash(hashHex));
      // The lookup found the key by this hash already; comparing again, in constant time, keeps
      // a wrong cache or index entry from ever letting another secret through.
      if (!key || key.hash.length !== hashHex.length || !timingSafeEqual(Buffer.from(key.hash, "latin1"), Buffer.from(hashHex, "latin1"))) {
        throw unauthenticated("Invalid API key.");
      }
      checkKey(key);
      checkAccount(directory.cachedAccount(key.accountId) ?? (await directory.account(key.accountId)));
      return create(AuthenticateResponseSchema, {
        principal: { keyId: key.id, accountId: key.accountId, keyName: key.name },
      });
    },

    // Not async: with the key, its account and the rate window at hand (the cache and a
    // process-local rate store), Admit answers without a single await.
    admit(req) {
      requireId(req.keyId, "key_id");
      const cachedKey = directory.cachedKey(req.keyId);
      const cachedAccount = cachedKey && directory.cachedAccount(cachedKey.accountId);
      if (cachedKey === undefined || cachedAccount === undefined) return loadAndAdmit(req);
      return admitWith(req, checkKey(cachedKey), checkAccount(cachedAccount));
    },

    async settle(req) {
      requireId(req.keyId, "key_id");
      requireRequestId(req.requestId);
      const kind = requireKind(req.kind);
      const prompt = toCount(req.usage?.promptTokens ?? 0n, "usage.prompt_tokens");
      const completion = toCount(req.usage?.completionTokens ?? 0n, "usage.completion_tokens");
      const decisionInput = toCount(req.usage?.inputTokens ?? 0n, "usage.input_tokens");
      // Revoked keys still pay for what they ran before revocation.
      const key = await directory.keyById(req.keyId);
      if (!key) throw notFound(`No key ${req.keyId}.`);
      const now = clock();
      const marker = requestKey(key.id, req.requestId);
      const usage = { prompt, completion, decisionInput };

      // A request that used nothing (refused after admission: 529, a 400 found late) releases
      // its hold and leaves no ledger entry: the ledger counts requests that did work.
      const first = await settleOnce(buckets, key.id, marker, { at: now, day: utcDay(now), keyId: key.id, ...usage }, async () => {
        // Its checkpoint, if it had one, is superseded (recovery skips settled requests anyway);
        // a request that never checkpointed has no entry to delete (a delete is a store write).
        if (req.checkpointed) void buckets.progress.delete(marker).catch(() => undefined);
        try {
          await guardStore(
            chargeQuota(buckets.quotas, key.accountId, {
              requestKey: marker,
              text: kind === "text" ? prompt + completion : 0,
              decision: kind === "decision" ? decisionInput : 0,
              now,
            }),
          );
        } catch (err) {
          // The ledger has the request; the reservation expires on its own.
          log.error({ err, keyId: key.id, requestId: req.requestId }, "settle: usage not charged to the quota");
          throw err;
        }
      });
      return create(SettleResponseSchema, { alreadySettled: !first });
    },

    async createKey(req) {
      const name = requireName(req.name);
      const rpm = req.limits?.requestsPerMinute ?? 0;
      let account: AccountRecord;
      if (req.accountId !== "") {
        if (req.limits?.textQuotaTokens !== undefined || req.limits?.decisionQuotaTokens !== undefined) {
          throw invalidArgument("Quotas belong to the account: set them with SetLimits, not when adding a key to an existing account.");
        }
        account = await existingAccount(req.accountId);
      } else {
        account = await directory.createAccount({
          status: "active",
          textQuota: toCount(req.limits?.textQuotaTokens ?? 0n, "limits.text_quota_tokens"),
          decisionQuota: toCount(req.limits?.decisionQuotaTokens ?? 0n, "limits.decision_quota_tokens"),
        });
      }
      const apiKey = newApiKey();
      const key = await directory.createKey({ accountId: account.id, name, rpm, hashHex: hashApiKey(apiKey) });
      log.info({ keyId: key.id, accountId: account.id }, "key created");
      return create(CreateKeyResponseSchema, { apiKey, key: keyInfo(key, defaultRpm) });
    },

    async ensureKey(req) {
      if (!isWellFormedApiKey(req.apiKey)) {
        throw invalidArgument("api_key must be `tsr_` followed by 1 to 256 of the characters A-Z a-z 0-9 . _ ~ -.");
      }
      const name = requireName(req.name || "bootstrap");
      const hashHex = hashApiKey(req.apiKey);
      for (;;) {
        const keyId = await directory.keyIdForHash(hashHex);
        if (keyId === undefined) {
          const account = await directory.createAccount({ status: "active", textQuota: 0, decisionQuota: 0 });
          try {
            const key = await directory.createKey({ accountId: account.id, name, rpm: 0, hashHex });
            log.info({ keyId: key.id, accountId: account.id }, "bootstrap key created");
            return create(EnsureKeyResponseSchema, { key: keyInfo(key, defaultRpm), created: true });
          } catch (err) {
            if (!(err instanceof RevisionConflictError)) throw err;
            await buckets.accounts.delete(account.id); // another caller registered it first
            continue;
          }
        }
        let key = await directory.keyById(keyId, true);
        if (!key) {
          // The hash was registered but the key never written (a crash in between): finish it.
          const account = await directory.createAccount({ status: "active", textQuota: 0, decisionQuota: 0 });
          try {
            key = await directory.writeNewKey(keyId, { accountId: account.id, name, rpm: 0, hashHex });
          } catch (err) {
            if (!(err instanceof RevisionConflictError)) throw err;
            await buckets.accounts.delete(account.id);
            continue;
          }
        }
        if (key.revokedAt !== null) {
          key = (await directory.updateKey(key.id, (k) => (k.revokedAt === null ? undefined : { ...k, revokedAt: null })))!;
          log.warn({ keyId: key.id }, "bootstrap key was revoked; reinstated");
        }
        await directory.activateAccount(key.accountId);
        return create(EnsureKeyResponseSchema, { key: keyInfo(key, defaultRpm), created: false });
      }
    },

    async revokeKey(req) {
      requireId(req.keyId, "key_id");
      const key = await directory.updateKey(req.keyId, (k) => (k.revokedAt !== null ? undefined : { ...k, revokedAt: clock() }));
      if (!key) throw notFound(`No key ${req.keyId}.`);
      log.info({ keyId: key.id }, "key revoked");
      return create(RevokeKeyResponseSchema, { key: keyInfo(key, defaultRpm) });
    },

    async listKeys() {
      const keys = await directory.listKeys();
      return create(ListKeysResponseSchema, { keys: keys.map((k) => keyInfo(k, defaultRpm)) });
    },

    async setAccountStatus(req) {
      requireId(req.accountId, "account_id");
      const status = statusFromProto(req.status);
      if (!status) throw invalidArgument("status must be ACTIVE, DISABLED or EMAIL_UNVERIFIED.");
      const account = await directory.updateAccount(req.accountId, (a) => (a.status === status ? undefined : { ...a, status }));
      if (!account) throw notFound(`No account ${req.accountId}.`);
      log.info({ accountId: account.id, status }, "account status set");
      return create(SetAccountStatusResponseSchema, { account: await accountView(account) });
    },

    async setLimits(req) {
      let key = await existingKey(req.keyId);
      const limits = req.limits;
      const textQuota = limits?.textQuotaTokens === undefined ? undefined : toCount(limits.textQuotaTokens, "limits.text_quota_tokens");
      const decisionQuota =
        limits?.decisionQuotaTokens === undefined ? undefined : toCount(limits.decisionQuotaTokens, "limits.decision_quota_tokens");
      const rpm = limits?.requestsPerMinute;
      if (rpm !== undefined) {
        key = (await directory.updateKey(key.id, (k) => (k.rpm === rpm ? undefined : { ...k, rpm })))!;
      }
      let account = await existingAccount(key.accountId);
      if (textQuota !== undefined || decisionQuota !== undefined) {
        account = (await directory.updateAccount(account.id, (a) => ({
          ...a,
          textQuota: textQuota ?? a.textQuota,
          decisionQuota: decisionQuota ?? a.decisionQuota,
        })))!;
      }
      log.info({ keyId: key.id, accountId: account.id, rpm, textQuota, decisionQuota }, "limits set");
      return create(SetLimitsResponseSchema, { key: keyInfo(key, defaultRpm), account: await accountView(account) });
    },

    async getAccount(req) {
      const account = await existingAccount(req.accountId);
      return create(GetAccountResponseSchema, { account: await accountView(account) });
    },

    async getUsage(req) {
      for (const [field, day] of [
        ["from_day", req.fromDay],
        ["to_day", req.toDay],
      ] as const) {
        if (day !== "" && !isUtcDay(day)) throw invalidArgument(`${field} must be a day written YYYY-MM-DD, got ${JSON.stringify(day)}.`);
      }
      const key = await existingKey(req.keyId);
      const toDay = req.toDay || utcDay(clock());
      if (req.fromDay !== "" && req.fromDay > toDay) throw invalidArgument("from_day is after to_day.");
      const rows = await readUsage(buckets.ledger, key.id, req.fromDay, toDay);
      return create(GetUsageResponseSchema, {
        days: rows.map((r) =>
          create(UsageDaySchema, {
            day: r.day,
            requests: BigInt(r.requests),
            promptTokens: BigInt(r.prompt),
            completionTokens: BigInt(r.completion),
            decisionInputTokens: BigInt(r.decisionInput),
          }),
        ),
      });
    },
  };
  return impl;
}

/** What Admit knows of one request once its key and account are checked. */
interface Admission {
  req: AdmitRequest;
  key: KeyRecord;
  account: AccountRecord;
  kind: QuotaKind | undefined;
  reserve: number;
  now: number;
}

function checkRate(rate: RateDecision, limit: number): RateDecision {
  if (!rate.admitted) throw rateLimited(limit, rate.resetSeconds);
  return rate;
}

const quotaOf = (account: AccountRecord, kind: QuotaKind) => (kind === "text" ? account.textQuota : account.decisionQuota);

function admitResponse(remainingRequests: number, resetSeconds: number): AdmitResponse {
  return create(AdmitResponseSchema, { remainingRequests, resetSeconds });
}
