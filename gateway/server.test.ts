// The gateway's request path with routes of its own and an accounting double: the headers it
// holds back and writes with the answer, for handlers that answer in JSON and for handlers
// that write the response themselves; the per-request deadline; request ids; Bearer parsing.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  AdmitResponseSchema,
  AuthenticateResponseSchema,
  PrincipalSchema,
  SettleResponseSchema,
  UsageKind,
  type AdmitRequest,
} from "../gen/tessera/accounting/v1/accounting_pb.js";
import { useBareGateway } from "../test/helpers/bare-gateway.js";
import type { Route } from "./route.js";
import { bearerKey } from "./bearer.js";
import type { AccountingGate } from "./gate.js";
import { newRequestId } from "./request-id.js";

const REQUEST_ID = /^req_[0-9a-f]{32}$/;
const KEY = "tsr_test-key";

const admits: AdmitRequest[] = [];
let remaining = 41;
const accounting: AccountingGate = {
  authenticate: async ({ apiKey }) => {
    if (apiKey !== KEY) throw new Error("unknown key");
    return create(AuthenticateResponseSchema, { principal: create(PrincipalSchema, { keyId: "key_1", accountId: "acct_1" }) });
  },
  admit: async (req) => {
    admits.push(req as AdmitRequest);
    return create(AdmitResponseSchema, { remainingRequests: remaining--, resetSeconds: 17 });
  },
  settle: async () => create(SettleResponseSchema, { alreadySettled: false }),
};

const admitted = { kind: UsageKind.UNSPECIFIED, hold: 0 };
const routes: Route[] = [
  {
    method: "GET",
    path: "/json",
    errorStyle: "detail",
    charge: admitted,
    body: "none",
    handle: () => ({ body: { ok: true }, headers: { "x-extra": "1", "Content-Type": "text/plain" } }),
  },
  {
    method: "GET",
    path: "/bytes",
    errorStyle: "detail",
    charge: admitted,
    body: "none",
    handle: () => ({ body: undefined, json: "ignored", bytes: Buffer.from('{"é":1}') }),
  },
  {
    method: "GET",
    path: "/writes-itself",
    errorStyle: "detail",
    charge: admitted,
    body: "none",
    handle: (ctx) => {
      ctx.res.writeHead(200, { "content-type": "text/event-stream" });
      ctx.res.end("data: x\n\n");
      return undefined;
    },
  },
  {
    method: "GET",
    path: "/admits-after-taking-res",
    errorStyle: "detail",
    charge: { kind: UsageKind.UNSPECIFIED, hold: "handler" },
    body: "none",
    handle: async (ctx) => {
      const res = ctx.res;
      await ctx.admit(UsageKind.UNSPECIFIED, 0);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
      return undefined;
    },
  },
  {
    method: "GET",
    path: "/never",
    errorStyle: "detail",
    body: "none",
    handle: (ctx) =>
      new Promise((_, reject) => {
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
      }),
  },
];

const gateway = useBareGateway({ routes, accounting, deadlineMs: 150 });
const logs = gateway.logs;

const get = (path: string, key: string | null = KEY) =>
  fetch(`${gateway.base}${path}`, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });

describe("the headers the gateway adds", () => {
  it("come with a JSON answer, beside the route's own headers, and the body is JSON", async () => {
    const res = await get("/json");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toMatch(/^\d+$/);
    expect(res.headers.get("x-ratelimit-reset-requests")).toBe("17s");
    expect(res.headers.get("x-extra")).toBe("1");
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ ok: true });
    const request = admits.at(-1)!;
    expect(request).toMatchObject({
      keyId: "key_1",
      requestId: res.headers.get("x-service-request-id"),
      kind: UsageKind.UNSPECIFIED,
      reserveTokens: 0n,
    });
  });

  it("come with an answer given as bytes, sent as they are with their length", async () => {
    const res = await get("/bytes");
    expect(res.headers.get("content-length")).toBe(String(Buffer.byteLength('{"é":1}')));
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toEqual({ é: 1 });
  });

  it("are on the response before a handler that writes it itself gets it", async () => {
    const res = await get("/writes-itself");
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(res.headers.get("x-ratelimit-reset-requests")).toBe("17s");
    expect(await res.text()).toBe("data: x\n\n");
  });

  it("follow an admission made after the handler took the response", async () => {
    const res = await get("/admits-after-taking-res");
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toMatch(/^\d+$/);
    expect(res.headers.get("x-ratelimit-reset-requests")).toBe("17s");
  });

  it("come with errors too, and the request is logged once under the same id", async () => {
    const res = await get("/json", null);
    expect(res.status).toBe(403);
    const id = res.headers.get("x-service-request-id");
    expect(id).toMatch(REQUEST_ID);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const lines = logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l["reqId"] === id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "request", route: "/json", status: 403, method: "GET" });
    expect(lines[0]).not.toHaveProperty("path");
  });
});

describe("the deadline", () => {
  it("answers 504 once it has passed and cancels the handler", async () => {
    const started = performance.now();
    const res = await get("/never", null);
    const waited = performance.now() - started;
    expect(res.status).toBe(504);
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(1_000);
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toMatchObject({ detail: { error_type: "api_error" } });
  });

  it("leaves requests answered in time alone", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => get("/json")));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
    const late = logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l["route"] === "/json" && l["deadlineExpired"]);
    expect(late).toEqual([]);
  });
});

describe("request ids and keys", () => {
  it("makes request ids of 128 random bits, never the same twice", () => {
    const ids = new Set(Array.from({ length: 5_000 }, newRequestId));
    expect(ids.size).toBe(5_000);
    for (const id of ids) expect(id).toMatch(REQUEST_ID);
  });

  it("reads the Bearer key however the header is spaced or cased, and nothing else", () => {
    expect(bearerKey("Bearer tsr_a")).toBe("tsr_a");
    expect(bearerKey("bearer tsr_a")).toBe("tsr_a");
    expect(bearerKey("  Bearer \t tsr_a  ")).toBe("tsr_a");
    expect(bearerKey("Bearer  tsr_a")).toBe("tsr_a");
    expect(bearerKey("Bearer tsr_a tsr_b")).toBeUndefined();
    expect(bearerKey("Bearer ")).toBeUndefined();
    expect(bearerKey("Basic dXNlcjpwYXNz")).toBeUndefined();
    expect(bearerKey(undefined)).toBeUndefined();
  });
});
