import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountStatus, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { OverloadedSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { startFakeInferenceWorker, type FakeWorker } from "../helpers/fake-worker.js";
import { newApiKey, startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
});
afterAll(async () => {
  await tessera?.close();
});

interface RouteCase {
  name: string;
  path: string;
  init: RequestInit;
  style: "openai" | "detail";
}

const ROUTES: RouteCase[] = [
  { name: "GET /v1/models", path: "/v1/models", init: {}, style: "detail" },
  {
    name: "POST /v1/systemone",
    path: "/v1/systemone",
    init: {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "decisionmodel-latest", state: "x", questions: { q: { type: "noul" } } }),
    },
    style: "detail",
  },
  {
    name: "POST /v1/chat/completions",
    path: "/v1/chat/completions",
    init: {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }] }),
    },
    style: "openai",
  },
];

/** The error's type in either shape, after checking the shape itself. */
function typeOf(style: RouteCase["style"], body: unknown): string {
  if (style === "openai") {
    const { error } = body as { error: { message: string; type: string; code: string } };
    expect(Object.keys(error).sort()).toEqual(["code", "message", "param", "type"]);
    expect(typeof error.message).toBe("string");
    return error.type;
  }
  const { detail } = body as { detail: { error_type: string; message: string } };
  expect(Object.keys(detail).sort()).toEqual(["error_type", "message"]);
  expect(typeof detail.message).toBe("string");
  return detail.error_type;
}

async function call(route: RouteCase, key: string | null, headers: Record<string, string> = {}) {
  const res = await tessera.fetch(route.path, {
    ...route.init,
    key,
    headers: { ...(route.init.headers as Record<string, string>), ...headers },
  });
  expect(res.headers.get("x-service-request-id")).toMatch(/^req_/);
  const body: unknown = await res.json();
  return { res, body };
}

describe.each(ROUTES)("authentication on $name", (route) => {
  it("answers 403 authentication_error when no key is sent", async () => {
    const { res, body } = await call(route, null);
    expect(res.status).toBe(403);
    expect(typeOf(route.style, body)).toBe("authentication_error");
    const basic = await call(route, null, { authorization: "Basic dXNlcjpwYXNz" });
    expect(basic.res.status).toBe(403);
    const empty = await call(route, null, { authorization: "Bearer " });
    expect(empty.res.status).toBe(403);
  });

  it("answers 401 authentication_error for an unknown key", async () => {
    for (const key of [newApiKey(), "hello", "tsr_"]) {
      const { res, body } = await call(route, key);
      expect(res.status).toBe(401);
      expect(typeOf(route.style, body)).toBe("authentication_error");
    }
  });

  it("answers 401 authentication_error for a revoked key", async () => {
    const key = await tessera.createKey();
    await tessera.clients.accounting.revokeKey({ keyId: key.keyId });
    const { res, body } = await call(route, key.apiKey);
    expect(res.status).toBe(401);
    expect(typeOf(route.style, body)).toBe("authentication_error");
  });

  it("refuses a key at once when it is revoked or its account disabled after it was used", async () => {
    const revoked = await tessera.createKey();
    const disabled = await tessera.createKey();
    for (const key of [revoked, disabled]) expect((await call(route, key.apiKey)).res.status).not.toBe(401);
    await tessera.clients.accounting.revokeKey({ keyId: revoked.keyId });
    await tessera.setAccountStatus(disabled.accountId, AccountStatus.DISABLED);
    const afterRevoke = await call(route, revoked.apiKey);
    expect(afterRevoke.res.status).toBe(401);
    expect(typeOf(route.style, afterRevoke.body)).toBe("authentication_error");
    const afterDisable = await call(route, disabled.apiKey);
    expect(afterDisable.res.status).toBe(403);
    expect(typeOf(route.style, afterDisable.body)).toBe("permission_error");
    await tessera.setAccountStatus(disabled.accountId, AccountStatus.ACTIVE);
    expect((await call(route, disabled.apiKey)).res.status).not.toBe(403);
  });

  it("answers 403 permission_error for a disabled or unverified account", async () => {
    for (const status of [AccountStatus.DISABLED, AccountStatus.EMAIL_UNVERIFIED]) {
      const key = await tessera.createKey();
      await tessera.setAccountStatus(key.accountId, status);
      const { res, body } = await call(route, key.apiKey);
      expect(res.status).toBe(403);
      expect(typeOf(route.style, body)).toBe("permission_error");
    }
  });
});

describe("limits and failures over HTTP", () => {
  let worker: FakeWorker;
  let overloaded = true;

  beforeAll(async () => {
    // A remote worker that counts tokens but refuses every generation and readout as overloaded.
    const refuse = () => {
      if (overloaded)
        throw new ConnectError("all slots busy", Code.ResourceExhausted, undefined, [
          { desc: OverloadedSchema, value: { retryAfterSeconds: 3 } },
        ]);
      throw new ConnectError("the model failed", Code.Unavailable);
    };
    worker = await startFakeInferenceWorker({
      countTokens: () => ({ tokens: 7 }),
      getModelInfo: refuse,
      score: refuse,
      // biome-ignore lint/correctness/useYield: the refusal must come from the stream's first read, as a real engine's does
      async *generate() {
        refuse();
      },
    });
  });
  afterAll(async () => {
    await worker?.close();
  });

  it("answers 503 api_error when no worker serves the model", async () => {
    const systemone = await call(ROUTES[1]!, tessera.key);
    expect(systemone.res.status).toBe(503);
    expect(typeOf("detail", systemone.body)).toBe("api_error");
    const chat = await call(ROUTES[2]!, tessera.key);
    expect(chat.res.status).toBe(503);
    expect(typeOf("openai", chat.body)).toBe("api_error");
  });

  it("answers 429 rate_limit_error with code rate_limit_exceeded and retry-after past the key's limit", async () => {
    // Chat admits after counting the prompt's tokens, which needs a worker.
    const publisher = tessera.announceWorker({ id: "rate-worker", address: worker.url });
    overloaded = false;
    try {
      for (const route of ROUTES) {
        const key = await tessera.createKey({ rpm: 1 });
        await roomInThisMinute(5_000);
        const first = await call(route, key.apiKey);
        expect(first.res.status, route.name).not.toBe(429);
        const { res, body } = await call(route, key.apiKey);
        expect(res.status, route.name).toBe(429);
        expect(typeOf(route.style, body)).toBe("rate_limit_error");
        const retryAfter = Number(res.headers.get("retry-after"));
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(60);
        if (route.style === "openai") expect((body as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
      }
    } finally {
      publisher.stop();
    }
  });

  it("answers 429 insufficient_quota once a quota is used up", async () => {
    const key = await tessera.createKey({ decisionQuota: 10, textQuota: 10 });
    for (const [kind, requestId] of [
      [UsageKind.DECISION, "spend-decision"],
      [UsageKind.TEXT, "spend-text"],
    ] as const) {
      await tessera.clients.accounting.admit({ keyId: key.keyId, requestId, kind, reserveTokens: 10n });
      await tessera.clients.accounting.settle({ keyId: key.keyId, requestId, kind, usage: { inputTokens: 10n, promptTokens: 10n } });
    }
    const systemone = await call(ROUTES[1]!, key.apiKey);
    expect(systemone.res.status).toBe(429);
    expect(typeOf("detail", systemone.body)).toBe("insufficient_quota");
    expect(systemone.res.headers.get("retry-after")).toBeNull();

    const publisher = tessera.announceWorker({ id: "quota-worker", address: worker.url });
    try {
      const chat = await call(ROUTES[2]!, key.apiKey);
      expect(chat.res.status).toBe(429);
      expect(chat.body).toMatchObject({ error: { type: "insufficient_quota", code: "insufficient_quota" } });
    } finally {
      publisher.stop();
    }
  });

  it("answers 529 overloaded_error with retry-after when every worker is full, 503 api_error when the model fails", async () => {
    const publisher = tessera.announceWorker({ id: "full-worker", address: worker.url });
    try {
      overloaded = true;
      const chat = await call(ROUTES[2]!, tessera.key);
      expect(chat.res.status).toBe(529);
      expect(chat.body).toMatchObject({ error: { type: "overloaded_error", code: "overloaded" } });
      expect(chat.res.headers.get("retry-after")).toBe("3");
      const systemone = await call(ROUTES[1]!, tessera.key);
      expect(systemone.res.status).toBe(529);
      expect(typeOf("detail", systemone.body)).toBe("overloaded_error");
      expect(systemone.res.headers.get("retry-after")).toBe("3");

      overloaded = false;
      const failed = await call(ROUTES[2]!, tessera.key);
      expect(failed.res.status).toBe(503);
      expect(failed.body).toMatchObject({ error: { type: "api_error", message: "the model failed" } });
    } finally {
      publisher.stop();
    }
  });
});
