// POST /v1/chat/completions end to end, its refusals: the official `openai` client and raw
// requests over real HTTP against the embedded server serving the tiny test model. Every error is
// an OpenAI error body with the right status, type and param; overload is 529 and recovers.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountStatus } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { ask, clientFor, expectOpenAiError, MODEL, postChat, weatherTool } from "../helpers/chat-e2e.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";
import { chatBurst } from "../helpers/openai.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny" });
  client = clientFor(tessera, tessera.key);
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

const post = (body: unknown, init: { key?: string | null } = {}) => postChat(tessera, body, init);

describe("chat completions: errors", () => {
  it("400 invalid_request_error naming the param, through the SDK and on the wire", async () => {
    const error = await client.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: "user", content: "a" },
          { role: "wizard" as "user", content: "b" },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const bad = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.status).toBe(400);
    expect(bad.type).toBe("invalid_request_error");
    expect(bad.param).toBe("messages[1].role");

    const cases: [unknown, string | null][] = [
      [{ messages: ask.messages }, "model"],
      [{ model: MODEL }, "messages"],
      [{ model: MODEL, messages: [] }, "messages"],
      [{ ...ask, max_tokens: 0 }, "max_tokens"],
      [{ ...ask, n: 2 }, "n"],
      [{ ...ask, stop: ["a", "b", "c", "d", "e"] }, "stop"],
      [{ ...ask, response_format: { type: "xml" } }, "response_format.type"],
      [{ ...ask, tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_time" } } }, "tool_choice.function.name"],
      [{ ...ask, stream: "yes" }, "stream"],
      [[1, 2, 3], null],
    ];
    for (const [body, param] of cases) {
      const res = await post(body);
      expectOpenAiError(res, 400, "invalid_request_error", { param });
    }
    const streamed = await post({ ...ask, stream: true, max_tokens: -1 });
    expectOpenAiError(streamed, 400, "invalid_request_error", { param: "max_tokens" });
  });

  it("400 for an image on a model without image support, naming the model", async () => {
    const res = await post({
      model: MODEL,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          ],
        },
      ],
    });
    expectOpenAiError(res, 400, "invalid_request_error", { param: "messages[0].content[1]" });
    expect(res.json.error.message).toContain(MODEL);
    const remote = await post({
      model: MODEL,
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://127.0.0.1:1/cat.png" } }] }],
    });
    expectOpenAiError(remote, 400, "invalid_request_error", { param: "messages[0].content[0].image_url.url" });
  });

  it("404 model_not_found for an unknown model", async () => {
    const error = await client.chat.completions.create({ ...ask, model: "gpt-4o" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
    const res = await post({ ...ask, model: "gpt-4o", stream: true });
    expectOpenAiError(res, 404, "invalid_request_error", { code: "model_not_found" });
  });

  it("401 for an unknown key, 403 without a key", async () => {
    const error = await clientFor(tessera, "tsr_not_a_real_key")
      .chat.completions.create(ask)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).type).toBe("authentication_error");
    expectOpenAiError(await post(ask, { key: "tsr_not_a_real_key" }), 401, "authentication_error");
    expectOpenAiError(await post(ask, { key: null }), 403, "authentication_error");
  });

  it("403 permission_error for a disabled or unverified account", async () => {
    for (const status of [AccountStatus.DISABLED, AccountStatus.EMAIL_UNVERIFIED]) {
      const key = await tessera.createKey();
      await tessera.setAccountStatus(key.accountId, status);
      const error = await clientFor(tessera, key.apiKey)
        .chat.completions.create(ask)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect((error as InstanceType<typeof OpenAI.PermissionDeniedError>).type).toBe("permission_error");
    }
  });

  it("413 for a body over 8 MB", async () => {
    const huge = { ...ask, messages: [{ role: "user", content: "x".repeat(9 * 1024 * 1024) }] };
    const error = await client.chat.completions.create(huge as typeof ask).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expectOpenAiError(await post(huge), 413, "invalid_request_error");
  });

  it("429 rate_limit_error (with retry-after) when a key passes its per-minute limit", async () => {
    const key = await tessera.createKey({ rpm: 2 });
    const limited = clientFor(tessera, key.apiKey);
    await roomInThisMinute(15_000);
    await limited.chat.completions.create({ ...ask, max_tokens: 1 });
    await limited.chat.completions.create({ ...ask, max_tokens: 1 });
    const error = await limited.chat.completions.create({ ...ask, max_tokens: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const rate = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(rate.type).toBe("rate_limit_error");
    expect(rate.code).toBe("rate_limit_exceeded");
    expect(Number(rate.headers?.get("retry-after"))).toBeGreaterThan(0);
  });

  it("429 insufficient_quota when the text-generation quota is used up", async () => {
    const key = await tessera.createKey({ textQuota: 30 });
    const error = await clientFor(tessera, key.apiKey)
      .chat.completions.create(ask)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).type).toBe("insufficient_quota");
    const res = await post({ ...ask, stream: true }, { key: key.apiKey });
    expectOpenAiError(res, 429, "insufficient_quota");
  });
});

describe("chat completions: overload", () => {
  let busy: TestTessera;

  beforeAll(async () => {
    busy = await startTestTessera({ models: "tiny", env: { TESSERA_SLOTS: "1", TESSERA_QUEUE: "0", TESSERA_DEFAULT_RPM: "1000" } });
  }, 120_000);

  afterAll(async () => {
    await busy?.close();
  });

  it("529 overloaded_error with retry-after when every slot is busy, streamed or not; then recovers", async () => {
    const overloaded = clientFor(busy, busy.key);
    const outcomes = await chatBurst(overloaded, { ...ask, max_tokens: 256 }, 6);
    expect(outcomes).toContain(200);
    const refused = outcomes.filter((o) => o !== 200) as InstanceType<typeof OpenAI.APIError>[];
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) {
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error.status).toBe(529);
      expect(error.type).toBe("overloaded_error");
      expect(Number(error.headers?.get("retry-after"))).toBeGreaterThan(0);
    }
    // Once the slot is free again, requests go through.
    const after = await overloaded.chat.completions.create({ ...ask, max_tokens: 8 });
    expect(after.choices[0]!.message.role).toBe("assistant");
  });

  it("a client that disconnects mid-stream frees the slot", async () => {
    const overloaded = clientFor(busy, busy.key);
    const stream = await overloaded.chat.completions.create({ ...ask, stream: true });
    for await (const _ of stream) break;
    // The slot is released within a step; allow the cancellation to land.
    let status = 0;
    for (let i = 0; i < 20 && status !== 200; i++) {
      status = await overloaded.chat.completions.create({ ...ask, max_tokens: 4 }).then(
        () => 200,
        (e: InstanceType<typeof OpenAI.APIError>) => e.status ?? 0,
      );
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  });
});
