// The official TypeSafe JavaScript SDK (@typesafe-ai/sdk, pinned, unchanged) against the real
// server: its README quickstart as printed, the three question types, structured levels, 255
// options, request ids on answers and errors, its error classes and their text, and its retries
// (429 rate limit, 429 insufficient_quota, 529) counted at its fetch.
import { execFile } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import OpenAI from "openai";
import {
  APIError,
  AuthenticationError,
  BadRequestError,
  choice,
  InternalServerError,
  noul,
  PermissionDeniedError,
  RateLimitError,
  score,
  TypeSafeClient,
  type TypeSafeClientConfig,
  UnprocessableEntityError,
} from "@typesafe-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountStatus, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { OverloadedSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";
import { type FakeWorker, startFakeInferenceWorker } from "../helpers/fake-worker.js";
import { REPO_ROOT, startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { wideChoiceModelDir } from "../helpers/wide-choice-model.js";

const REQUEST_ID = /^req_[0-9a-f]{32}$/;
const SDK_DIR = join(REPO_ROOT, "node_modules/@typesafe-ai/sdk");

/** What the SDK's fetch sent and got, one entry per attempt. */
interface Attempt {
  retryCount: string | null;
  sdk: string | null;
  status: number;
}

/** A client of `url` whose attempts are recorded; `retry` only as a caller may configure it. */
function sdkClient(url: string, apiKey: string, config: TypeSafeClientConfig = {}): { client: TypeSafeClient; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  const client = new TypeSafeClient({
    apiKey,
    baseURL: url,
    logLevel: "off",
    timeout: 60_000,
    ...config,
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      const headers = new Headers(init?.headers);
      attempts.push({ retryCount: headers.get("x-typesafe-retry-count"), sdk: headers.get("x-typesafe-sdk"), status: res.status });
      return res;
    },
  });
  return { client, attempts };
}

/** The SDK error `work` rejects with; it must reject with one. */
async function caught(work: Promise<unknown>): Promise<APIError> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  const apiError = err as APIError;
  // Every error names its request by the id the SDK reads, the same as the service's own header.
  expect(apiError.requestId).toMatch(REQUEST_ID);
  expect(apiError.requestId).toBe(apiError.headers.get("x-service-request-id"));
  return apiError;
}

/** Uses up a key's decision and text quotas, as in test/gateway/auth.test.ts. */
async function spendQuotas(tessera: TestTessera, keyId: string): Promise<void> {
  for (const [kind, requestId] of [
    [UsageKind.DECISION, "spend-decision"],
    [UsageKind.TEXT, "spend-text"],
  ] as const) {
    await tessera.clients.accounting.admit({ keyId, requestId, kind, reserveTokens: 10n });
    await tessera.clients.accounting.settle({ keyId, requestId, kind, usage: { inputTokens: 10n, promptTokens: 10n } });
  }
}

const wide = (count: number, describe = (_i: number): string | null => null) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`o${i}`, describe(i)]));

describe("@typesafe-ai/sdk against Tessera (tiny model with 255 choice labels)", () => {
  let tessera: TestTessera;
  let modelDir: string;

  beforeAll(async () => {
    modelDir = wideChoiceModelDir(255);
    tessera = await startTestTessera({ modelDir });
  }, 120_000);
  afterAll(async () => {
    await tessera?.close();
    rmSync(modelDir, { recursive: true, force: true });
  });

  it("runs the SDK README's quickstart as printed, configured from the environment", async () => {
    const readme = readFileSync(join(SDK_DIR, "README.md"), "utf8");
    const quickstart = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.includes("systemOne"));
    expect(quickstart).toContain("new TypeSafeClient()");
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "--eval", quickstart!], {
      cwd: REPO_ROOT,
      env: { ...process.env, TYPESAFE_API_KEY: tessera.key, TYPESAFE_BASE_URL: tessera.url },
    });
    expect(["billing", "technical", "other"]).toContain(stdout.trim());
  });

  it("answers the three types with request ids, model version, usage and the models list", async () => {
    const { client, attempts } = sdkClient(tessera.url, tessera.key);
    const { data, requestId, response } = await client
      .systemOne({
        state: { ticket: "I was charged twice. Please fix this ASAP.", customer: { plan: "pro" } },
        questions: {
          urgent: noul("Is this urgent?", { true: "needs an answer today", false: null }),
          category: choice({ ask: "What is this about?" }, { billing: null, technical: { examples: ["bug"] }, other: "anything else" }),
          mood: score(["How upset is the customer?"], ["calm", "annoyed", "furious"]),
        },
      })
      .withResponse();
    expect(requestId).toMatch(REQUEST_ID);
    expect(requestId).toBe(response.headers.get("x-service-request-id"));
    expect(requestId).toBe(response.headers.get("x-request-id"));
    expect(attempts).toEqual([{ retryCount: null, sdk: "typesafe-sdk/0.6.0", status: 200 }]);
    expect(data.model).toBe("decisionmodel-0.1"); // jev-latest, the SDK's default model, resolved
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect(data.usage.output_tokens).toBe(0);
    expect(data.answers.urgent.noul).toBeGreaterThan(0);
    expect(data.answers.urgent.noul).toBeLessThan(1);
    expect(["billing", "technical", "other"]).toContain(data.answers.category.choice);
    const sum = (ps: object) => Object.values(ps).reduce((a: number, p: number) => a + p, 0);
    expect(sum(data.answers.category.probabilities)).toBeCloseTo(1, 5);
    expect(data.answers.mood.legend).toEqual({ "0": "calm", "1": "annoyed", "2": "furious" });
    expect(data.answers.mood.score).toBeGreaterThanOrEqual(0);
    expect(data.answers.mood.score).toBeLessThanOrEqual(2);

    const models = await client.models.list();
    expect(models.map((m) => m.name)).toEqual(expect.arrayContaining(["decisionmodel-latest", "decisionmodel-0.1"]));
    for (const m of models) expect(m.release_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it("takes object, array and null score levels, rendered as the same texts sent as strings", async () => {
    const { client } = sdkClient(tessera.url, tessera.key);
    const state = "The package arrived crushed and two days late.";
    const structured = await client.systemOne({
      state,
      questions: { mood: score("How upset?", [{ label: "calm" }, ["angry", { very: true }], null]) },
    });
    const texts = await client.systemOne({
      state,
      questions: { mood: score("How upset?", ['{"label":"calm"}', '["angry",{"very":true}]', ""]) },
    });
    // The document's legend is a map of strings: a structured level is its JSON text, null is empty.
    expect(structured.answers.mood.legend).toEqual({ "0": '{"label":"calm"}', "1": '["angry",{"very":true}]', "2": "" });
    expect(structured.answers.mood).toEqual(texts.answers.mood);
  });

  it("answers 255 options; refuses 256 (422) and says whether the context or the work cap is overflowed (400)", async () => {
    const { client } = sdkClient(tessera.url, tessera.key);
    const widest = await client.systemOne({ state: "pick one", questions: { q: choice("Which?", wide(255)) } });
    expect(Object.keys(widest.answers.q.probabilities)).toHaveLength(255);
    expect(Object.values(widest.answers.q.probabilities).reduce((a, p) => a + p, 0)).toBeCloseTo(1, 5);

    const tooMany = await caught(client.systemOne({ state: "s", questions: { q: choice("Which?", wide(256)) } }));
    expect(tooMany).toBeInstanceOf(UnprocessableEntityError);
    expect(tooMany.message).toBe("422 questions.q.criteria: a choice question needs 1 to 255 options");

    const longOptions = await caught(
      client.systemOne({
        state: "s",
        questions: {
          q: choice(
            "Which?",
            wide(255, (i) => `a rather long description of option ${i}`),
          ),
        },
      }),
    );
    expect(longOptions).toBeInstanceOf(BadRequestError);
    expect(longOptions.message).toMatch(
      /^400 prompt too long: the state and question "q" need \d+ tokens .* the context of model .* is 2048 tokens$/,
    );

    const many = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`q${i}`, choice("Which?", wide(255))]));
    const overWork = await caught(client.systemOne({ state: "s", questions: many }));
    expect(overWork).toBeInstanceOf(BadRequestError);
    expect(overWork.message).toMatch(
      /^400 this request needs .* tokens of model work .* at most 8192 \(TESSERA_MAX_DECISION_WORK_TOKENS\)/,
    );
  });

  it("maps every error to the SDK's class with a readable message and the request id", async () => {
    const { client } = sdkClient(tessera.url, tessera.key);
    const level = await caught(
      client.systemOne({ state: "s", questions: { q: { type: "score", criteria: ["low", 7 as unknown as string] } } }),
    );
    expect(level).toBeInstanceOf(UnprocessableEntityError);
    expect(level.message).toBe("422 questions.q.criteria[1]: a level must be a string, an object, an array or null");
    // The path stays whole in detail[], as FastAPI writes it.
    expect((level.body as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual(["body", "questions", "q", "criteria", 1]);

    const unknownModel = await caught(client.systemOne({ model: "no-such-model", state: "s", questions: { q: noul() } }));
    expect(unknownModel).toBeInstanceOf(BadRequestError);
    expect(unknownModel.message).toBe('400 unknown model "no-such-model"');

    const badKey = await caught(sdkClient(tessera.url, "tsr_unknown").client.systemOne({ state: "s", questions: { q: noul() } }));
    expect(badKey).toBeInstanceOf(AuthenticationError);
    expect(badKey.status).toBe(401);

    const disabled = await tessera.createKey();
    await tessera.setAccountStatus(disabled.accountId, AccountStatus.DISABLED);
    const denied = await caught(sdkClient(tessera.url, disabled.apiKey).client.systemOne({ state: "s", questions: { q: noul() } }));
    expect(denied).toBeInstanceOf(PermissionDeniedError);
    expect(denied.status).toBe(403);
  });

  it("retries 429 rate_limit_error (retry-after read, retry count sent) and counts its attempts", async () => {
    const key = await tessera.createKey({ rpm: 1 });
    // Only how long to wait is configured: the server's retry-after (up to 60 s) is over this cap, so backoff applies.
    const { client, attempts } = sdkClient(tessera.url, key.apiKey, { retry: { maxRetryAfterMs: 0, backoffInitialMs: 10 } });
    await roomInThisMinute(10_000);
    await client.systemOne({ state: "s", questions: { q: noul() } });
    const err = await caught(client.systemOne({ state: "s", questions: { q: noul() } }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err.message).toMatch(/^429 /);
    expect((err as RateLimitError).retryAfterMs).toBe(Number(err.headers.get("retry-after")) * 1000);
    expect(attempts.map((a) => [a.status, a.retryCount])).toEqual([
      [200, null],
      [429, null],
      [429, "1"],
      [429, "2"],
    ]);
  });

  it("429 insufficient_quota says x-should-retry: false without retry-after; the SDK retries it anyway, the OpenAI SDK does not", async () => {
    const key = await tessera.createKey({ decisionQuota: 10, textQuota: 10 });
    await spendQuotas(tessera, key.keyId);
    const { client, attempts } = sdkClient(tessera.url, key.apiKey, { retry: { backoffInitialMs: 10 } });
    const err = await caught(client.systemOne({ state: "s", questions: { q: noul() } }));
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err.body as { detail: { error_type: string } }).detail.error_type).toBe("insufficient_quota");
    expect(err.headers.get("x-should-retry")).toBe("false");
    expect(err.headers.get("retry-after")).toBeNull();
    expect((err as RateLimitError).retryAfterMs).toBeUndefined();
    // @typesafe-ai/sdk 0.6.0 retries every 429 and reads no x-should-retry: 1 + maxRetries attempts.
    expect(attempts.map((a) => a.status)).toEqual([429, 429, 429]);

    // A Stainless-style SDK stops at once (here the text quota, on chat completions).
    let chatAttempts = 0;
    const openai = new OpenAI({
      apiKey: key.apiKey,
      baseURL: `${tessera.url}/v1`,
      maxRetries: 2,
      fetch: async (input: string | URL | Request, init?: RequestInit) => {
        chatAttempts++;
        return fetch(input, init);
      },
    });
    const refused = await openai.chat.completions.create({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).code).toBe("insufficient_quota");
    expect(chatAttempts).toBe(1);
  });

  it("answers a CORS preflight on a server without TESSERA_CORS_ORIGINS with a hint naming the setting", async () => {
    const res = await tessera.fetch("/v1/systemone", {
      method: "OPTIONS",
      key: null,
      headers: { origin: "http://localhost:5173", "access-control-request-method": "POST" },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const body = (await res.json()) as { detail: { message: string } };
    expect(body.detail.message).toMatch(/TESSERA_CORS_ORIGINS, which is not set on this server/);
  });
});

describe("@typesafe-ai/sdk retrying 529 overloaded_error", () => {
  let tessera: TestTessera;
  let worker: FakeWorker;
  let reads = 0;

  beforeAll(async () => {
    tessera = await startTestTessera({ models: "none" });
    // A worker whose every readout is refused as overloaded, retry after 1 s.
    const refuse = () => {
      reads++;
      throw new ConnectError("all slots busy", Code.ResourceExhausted, undefined, [
        { desc: OverloadedSchema, value: { retryAfterSeconds: 1 } },
      ]);
    };
    worker = await startFakeInferenceWorker({ countTokens: () => ({ tokens: 7 }), getModelInfo: refuse, score: refuse });
    tessera.announceWorker({ id: "full-worker", address: worker.url });
  }, 120_000);
  afterAll(async () => {
    await tessera?.close();
    await worker?.close();
  });

  it("retries after the server's retry-after, then throws InternalServerError 529 with the request id", async () => {
    const { client, attempts } = sdkClient(tessera.url, tessera.key, { retry: { maxRetries: 1 } });
    const started = Date.now();
    const err = await caught(client.systemOne({ state: "s", questions: { q: noul() } }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000); // retry-after: 1 honoured
    expect(err).toBeInstanceOf(InternalServerError);
    expect(err.status).toBe(529);
    expect(err.message).toBe("529 all slots busy");
    expect(err.headers.get("retry-after")).toBe("1");
    expect(attempts.map((a) => [a.status, a.retryCount])).toEqual([
      [529, null],
      [529, "1"],
    ]);
    expect(reads).toBe(2);
  });
});
