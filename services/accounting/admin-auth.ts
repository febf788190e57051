import { createHash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";

/** The request path's RPCs, called by gateways (and the Connect mount) on every request. */
export const INTERNAL_METHODS: ReadonlySet<string> = new Set(["Authenticate", "Admit", "Settle"]);

/** Everything else: keys, accounts, limits, usage. */
export const ADMIN_METHODS: ReadonlySet<string> = new Set(
  AccountingService.methods.map((m) => m.name).filter((name) => !INTERNAL_METHODS.has(name)),
);

export interface AccountingAuthOptions {
  /** TESSERA_ADMIN_TOKEN. Unset: the admin RPCs are refused (the embedded CLI still works on the store). */
  adminToken: string | undefined;
  /** TESSERA_INTERNAL_TOKEN. Unset: the internal RPCs need no credential (trust the network, e.g. a NetworkPolicy). */
  internalToken: string | undefined;
}

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** Constant time in the secret: both sides are hashed to 32 bytes before comparing. */
function matches(presented: string, expected: Buffer): boolean {
  return timingSafeEqual(digest(presented), expected);
}

/**
 * Guards accounting's port in distributed mode. Admin RPCs need `authorization: Bearer
 * <TESSERA_ADMIN_TOKEN>`; the internal ones need `Bearer <TESSERA_INTERNAL_TOKEN>` (or the
 * admin token) when an internal token is configured, and nothing otherwise. No credential
 * → Unauthenticated; a wrong one → PermissionDenied; admin RPCs without a configured admin
 * token → PermissionDenied, whatever is sent.
 */
export function accountingAuthInterceptor(options: AccountingAuthOptions): Interceptor {
  const admin = options.adminToken === undefined ? undefined : digest(options.adminToken);
  const internal = options.internalToken === undefined ? undefined : digest(options.internalToken);
  return (next) => async (req) => {
    if (req.service.typeName !== AccountingService.typeName) return next(req);
    const isInternal = INTERNAL_METHODS.has(req.method.name);
    if (isInternal && internal === undefined) return next(req);
    if (!isInternal && admin === undefined) {
      throw new ConnectError(
        `${req.method.name} is an admin RPC and this accounting service has no admin token: set TESSERA_ADMIN_TOKEN`,
        Code.PermissionDenied,
      );
    }
    const presented = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.header.get("authorization") ?? "")?.[1];
    if (presented === undefined) {
      throw new ConnectError(
        `${req.method.name} needs a credential: send authorization: Bearer <${isInternal ? "TESSERA_INTERNAL_TOKEN" : "TESSERA_ADMIN_TOKEN"}>`,
        Code.Unauthenticated,
      );
    }
    // Both comparisons always run, so the time says nothing about which token was close.
    const isAdmin = admin !== undefined && matches(presented, admin);
    const isInternalCaller = internal !== undefined && matches(presented, internal);
    if (isAdmin || (isInternal && isInternalCaller)) return next(req);
    throw new ConnectError(`the credential sent is not valid for ${req.method.name}`, Code.PermissionDenied);
  };
}
