import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createMemoryStore, type Store } from "../../lib/store/index.js";
import { bearerInterceptor } from "../../lib/remote/clients.js";
import { accountingAuthInterceptor, ADMIN_METHODS, INTERNAL_METHODS, type AccountingAuthOptions } from "./admin-auth.js";
import { accountingRoutes } from "./server.js";
import { silentLogger } from "../../test/helpers/accounting-harness.js";

const ADMIN = "admin-token-0123456789abcdef";
const INTERNAL = "internal-token-0123456789abcdef";
const stores: Store[] = [];
afterEach(async () => {
  while (stores.length > 0) await stores.pop()!.close();
});

/** Accounting behind the interceptor, as `tessera serve accounting` mounts it; a client per credential. */
function setup(auth: AccountingAuthOptions) {
  const store = createMemoryStore();
  stores.push(store);
  const transport = (token?: string) =>
    createRouterTransport(accountingRoutes({ store, logger: silentLogger, defaultRequestsPerMinute: 100 }), {
      router: { interceptors: [accountingAuthInterceptor(auth)] },
      transport: { interceptors: token === undefined ? [] : [bearerInterceptor(token)] },
    });
  return (token?: string) => createClient(AccountingService, transport(token));
}

const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => "ok",
    (err: unknown) => ConnectError.from(err).code,
  );

describe("accounting's admin and internal credentials", () => {
  it("splits the RPCs into the request path and admin", () => {
    expect([...INTERNAL_METHODS].sort()).toEqual(["Admit", "Authenticate", "Settle"]);
    expect(ADMIN_METHODS.has("CreateKey") && ADMIN_METHODS.has("GetUsage") && ADMIN_METHODS.has("EnsureKey")).toBe(true);
    expect([...ADMIN_METHODS].some((m) => INTERNAL_METHODS.has(m))).toBe(false);
  });

  it("admin RPCs need the admin token: none → Unauthenticated, wrong → PermissionDenied", async () => {
    const client = setup({ adminToken: ADMIN, internalToken: undefined });
    expect(await codeOf(client().listKeys({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(client("x".repeat(40)).listKeys({}))).toBe(Code.PermissionDenied);
    expect(await codeOf(client(ADMIN.slice(0, -1)).listKeys({}))).toBe(Code.PermissionDenied);
    const created = await client(ADMIN).createKey({ name: "k" });
    expect(created.apiKey).toMatch(/^tsr_/);
    // Without an internal token, the request path is open (the network is trusted).
    const { principal } = await client().authenticate({ apiKey: created.apiKey });
    expect(principal?.keyId).toBe(created.key?.keyId);
  });

  it("with an internal token, the request path needs it (or the admin token); it opens no admin RPC", async () => {
    const client = setup({ adminToken: ADMIN, internalToken: INTERNAL });
    const { apiKey } = await client(ADMIN).createKey({ name: "k" });
    expect(await codeOf(client().authenticate({ apiKey }))).toBe(Code.Unauthenticated);
    expect(await codeOf(client("not-the-internal-token").authenticate({ apiKey }))).toBe(Code.PermissionDenied);
    expect(await codeOf(client(INTERNAL).authenticate({ apiKey }))).toBe("ok");
    expect(await codeOf(client(ADMIN).authenticate({ apiKey }))).toBe("ok");
    expect(await codeOf(client(INTERNAL).listKeys({}))).toBe(Code.PermissionDenied);
  });

  it("without an admin token, admin RPCs are refused whatever is sent", async () => {
    const client = setup({ adminToken: undefined, internalToken: undefined });
    const err = await client(ADMIN)
      .listKeys({})
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    expect((err as ConnectError).rawMessage).toMatch(/TESSERA_ADMIN_TOKEN/);
  });
});
