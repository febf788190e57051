// The gate's principal cache: a known key costs one accounting call (Admit), not two, and a key
// Admit refuses is looked up again; settles say whether the call ever checkpointed.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  type AdmitRequest,
  AdmitResponseSchema,
  AuthenticateResponseSchema,
  type SettleRequest,
  SettleResponseSchema,
  UsageKind,
} from "../gen/tessera/accounting/v1/accounting_pb.js";
import { silentLogger as newSilentLogger } from "../lib/logger.js";
import { type AccountingGate, type Charge, createGate, type GatedCall } from "./gate.js";

function fakeAccounting() {
  const calls = { authenticate: 0, admits: [] as AdmitRequest[], settles: [] as SettleRequest[], revoked: false };
  const accounting: AccountingGate = {
    authenticate: async () => {
      calls.authenticate++;
      if (calls.revoked) throw new ConnectError("The API key has been revoked.", Code.Unauthenticated);
      return create(AuthenticateResponseSchema, { principal: { keyId: "key_1", accountId: "acct_1" } });
    },
    admit: async (req) => {
      calls.admits.push(req as AdmitRequest);
      if (calls.revoked && req.delivered === undefined) throw new ConnectError("The API key has been revoked.", Code.Unauthenticated);
      return create(AdmitResponseSchema, { remainingRequests: 5, resetSeconds: 60 });
    },
    settle: async (req) => {
      calls.settles.push(req as SettleRequest);
      return create(SettleResponseSchema, { alreadySettled: false });
    },
  };
  return { calls, gate: createGate({ accounting, logger: newSilentLogger() }) };
}

let ids = 0;
const call = (): GatedCall => ({
  requestId: `req_${++ids}`,
  authorization: "Bearer tsk_secret",
  remoteAddress: "10.0.0.1",
  principal: undefined,
  pendingSettle: undefined,
  admitted: () => undefined,
});
const unary = async () => ({ stream: false as const, message: {} });

describe("the gate's principal cache", () => {
  for (const [name, charge] of [
    ["a route with a fixed hold", { kind: UsageKind.TEXT, hold: 10 }],
    ["a route that sizes its own hold (Admit check_only)", { kind: UsageKind.TEXT, hold: "handler" }],
  ] as const) {
    it(`${name}: Authenticate once, then only Admit while the key is cached`, async () => {
      const { calls, gate } = fakeAccounting();
      const around = gate.around(charge as Charge, unary);
      for (let i = 0; i < 3; i++) await around(call());
      expect(calls.authenticate).toBe(1);
      expect(calls.admits).toHaveLength(3);
    });

    it(`${name}: a key Admit refuses (revoked) is dropped from the cache and looked up again`, async () => {
      const { calls, gate } = fakeAccounting();
      const around = gate.around(charge as Charge, unary);
      await around(call());
      calls.revoked = true;
      await expect(around(call())).rejects.toMatchObject({ code: Code.Unauthenticated });
      expect(calls.authenticate).toBe(1);
      await expect(around(call())).rejects.toMatchObject({ code: Code.Unauthenticated });
      expect(calls.authenticate).toBe(2);
    });
  }

  it("a rate-only route whose handler admits itself authenticates every time (no Admit follows at once)", async () => {
    const { calls, gate } = fakeAccounting();
    const around = gate.around({ kind: UsageKind.UNSPECIFIED, hold: "handler" }, unary);
    for (let i = 0; i < 2; i++) await around(call());
    expect(calls.authenticate).toBe(2);
    expect(calls.admits).toHaveLength(0);
  });
});

describe("the gate's settles", () => {
  it("tell accounting whether the call checkpointed (only then is there a progress entry to delete)", async () => {
    const { calls, gate } = fakeAccounting();
    const plain = call();
    await gate.around({ kind: UsageKind.TEXT, hold: 10 }, unary)(plain);
    const streamed = call();
    await gate.around({ kind: UsageKind.TEXT, hold: 10 }, async (c: GatedCall) => {
      gate.checkpoint(c, UsageKind.TEXT, { promptTokens: 3 });
      return { stream: false as const, message: {} };
    })(streamed);
    expect(calls.settles.map((s) => [s.requestId, s.checkpointed])).toEqual([
      [plain.requestId, false],
      [streamed.requestId, true],
    ]);
  });
});
