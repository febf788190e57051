// POST /v1/chat/completions end to end: the official `openai` client over real HTTP against the
// embedded server serving the tiny test model (test/fixtures/tiny-model). The tiny model has
// random weights, so its text is noise; what these tests pin down is the shape and the rules
// (JSON modes, tools, thinking, length, streaming, errors), which hold whatever the text is.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountStatus } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { chatBurst } from "../helpers/openai.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";

let tessera: TestTessera;
let client: OpenAI;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny" });
  client = clientFor(tessera, tessera.key);
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

function clientFor(server: TestTessera, apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 60_000 });
}

const MODEL = "textmodel-26b";
const ask = { model: MODEL, messages: [{ role: "user" as const, content: "What is the weather like in Paris today?" }] };
const weatherTool = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const forceWeather = { type: "function" as const, function: { name: "get_weather" } };

/** Chunks as the server sent them (the SDK types do not know `reasoning`). */
type Chunk = OpenAI.ChatCompletionChunk & { choices: { delta: { reasoning?: string } }[] };
type Message = OpenAI.ChatCompletionMessage & { reasoning?: string };

async function streamAll(params: Record<string, unknown>): Promise<Chunk[]> {
  const stream = await client.chat.completions.create({ ...ask, ...params, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
  const chunks: Chunk[] = [];
  for await (const chunk of stream) chunks.push(chunk as Chunk);
  return chunks;
}

const joined = (chunks: Chunk[], field: "content" | "reasoning") => chunks.map((c) => c.choices[0]?.delta[field] ?? "").join("");

/** The OpenAI error body (the only part of a response these helpers' callers read). */
type ErrorJson = { error: { message: string; type: string; code?: string | null; param?: string | null } };

async function post(body: unknown, init: { key?: string | null } = {}) {
  const res = await tessera.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: JSON.parse(text) as ErrorJson };
}

function expectOpenAiError(
  res: { status: number; json: ErrorJson; headers: Headers },
  status: number,
  type: string,
  extra: { code?: string; param?: string | null } = {},
) {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  expect(res.json.error).toMatchObject({ type, message: expect.any(String), ...extra });
  expect(res.headers.get("x-service-request-id")).toMatch(/\S/);
}

describe("chat completions: plain", () => {
  it("answers a chat.completion object with usage and a request id", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { data: completion, response } = await client.chat.completions.create(ask).withResponse();
    expect(response.headers.get("x-service-request-id")).toMatch(/\S/);
    expect(completion.id).toMatch(/^chatcmpl-\S+$/);
    expect(completion.object).toBe("chat.completion");
    expect(completion.created).toBeGreaterThanOrEqual(before - 1);
    expect(completion.model).toBe(MODEL);
    expect(completion.choices).toHaveLength(1);
    const [choice] = completion.choices;
    expect(choice!.index).toBe(0);
    expect(choice!.message.role).toBe("assistant");
    expect(typeof choice!.message.content).toBe("string");
    expect(["stop", "length"]).toContain(choice!.finish_reason);
    expect(choice!.message).not.toHaveProperty("reasoning");
    const usage = completion.usage!;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  });

  it("max_tokens 5 ends with finish_reason length", async () => {
    const completion = await client.chat.completions.create({ ...ask, max_tokens: 5 });
    expect(completion.choices[0]!.finish_reason).toBe("length");
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(5);
    const synonym = await client.chat.completions.create({ ...ask, max_completion_tokens: 5 });
    expect(synonym.choices[0]!.finish_reason).toBe("length");
    expect(synonym.usage!.completion_tokens).toBeLessThanOrEqual(5);
  });

  it("caps max_tokens above 8192 instead of refusing, and ignores the ignored fields", async () => {
    const completion = await client.chat.completions.create({
      ...ask,
      max_tokens: 1_000_000,
      temperature: 0.2,
      seed: 7,
      presence_penalty: 1,
      frequency_penalty: 1,
      logit_bias: { "1": 5 },
      top_p: 0.5,
      user: "someone",
      // @ts-expect-error fields the SDK does not type, sent by users of other servers
      min_p: 0.1,
      reasoning: { effort: "low" },
      an_unknown_field: [1, 2],
    });
    expect(completion.choices[0]!.message.role).toBe("assistant");
  });
});

describe("chat completions: streaming", () => {
  it("streams chunks: role first, finish_reason, usage in the last event before [DONE]", async () => {
    const plain = await client.chat.completions.create(ask);
    const chunks = await streamAll({ stream_options: { include_usage: true } });
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    for (const chunk of chunks) {
      expect(chunk.object).toBe("chat.completion.chunk");
      expect(chunk.id).toBe(chunks[0]!.id);
      expect(chunk.model).toBe(MODEL);
    }
    expect(chunks[0]!.id).toMatch(/^chatcmpl-/);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(plain.usage);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe(plain.choices[0]!.finish_reason);
    // The model is deterministic: streamed and plain replies are the same text.
    expect(joined(chunks, "content")).toBe(plain.choices[0]!.message.content);
  });

  it("without include_usage: usage on the finish_reason chunk, the last before [DONE], on the wire as SSE", async () => {
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...ask, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-service-request-id")).toMatch(/\S/);
    const text = await res.text();
    const events = text
      .split("\n\n")
      .filter((e) => e.startsWith("data: "))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const beforeDone = JSON.parse(events.at(-2)!);
    expect(beforeDone.choices).toHaveLength(1);
    expect(["stop", "length"]).toContain(beforeDone.choices[0].finish_reason);
    expect(beforeDone.usage.total_tokens).toBe(beforeDone.usage.prompt_tokens + beforeDone.usage.completion_tokens);
    // Every chunk has a choice: the usual `chunk.choices[0].delta` loop never throws.
    for (const event of events.slice(0, -1)) expect(JSON.parse(event).choices).toHaveLength(1);
  });

  it("streams max_tokens 5 to finish_reason length", async () => {
    const chunks = await streamAll({ max_tokens: 5 });
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("length");
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeLessThanOrEqual(5);
  });
});

describe("chat completions: JSON modes", () => {
  /** The first JSON object of the reply: from the first `{` on, or the whole reply when it has none. */
  function expectJsonContent(content: string | null) {
    expect(typeof content).toBe("string");
    if (content!.includes("{")) expect(content!.startsWith("{")).toBe(true);
    let parsed: unknown;
    try {
      parsed = JSON.parse(content!);
    } catch {
      return; // the tiny model writes noise; a real model's reply parses
    }
    expect(typeof parsed).toBe("object");
  }

  it("json_object", async () => {
    const completion = await client.chat.completions.create({ ...ask, response_format: { type: "json_object" } });
    expectJsonContent(completion.choices[0]!.message.content);
    const chunks = await streamAll({ response_format: { type: "json_object" } });
    expect(joined(chunks, "content")).toBe(completion.choices[0]!.message.content);
  });

  it("json_schema", async () => {
    const completion = await client.chat.completions.create({
      ...ask,
      response_format: {
        type: "json_schema",
        json_schema: { name: "weather", schema: { type: "object", properties: { city: { type: "string" }, celsius: { type: "number" } } } },
      },
    });
    expectJsonContent(completion.choices[0]!.message.content);
  });
});

describe("chat completions: tools", () => {
  it("a named tool choice is honoured: a call of that function, finish_reason tool_calls", async () => {
    const completion = await client.chat.completions.create({ ...ask, tools: [weatherTool], tool_choice: forceWeather });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const calls = choice.message.tool_calls!;
    expect(calls.length).toBeGreaterThanOrEqual(1);
    const call = calls[0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_[A-Za-z0-9]+$/);
    expect(call.type).toBe("function");
    expect(call.function.name).toBe("get_weather");
    expect(typeof call.function.arguments).toBe("string");
    for (const c of calls) expect(c.type).toBe("function");
  });

  it("a streamed named tool call adds up in the SDK's stream helper", async () => {
    const plain = await client.chat.completions.create({ ...ask, tools: [weatherTool], tool_choice: forceWeather });
    const final = await client.chat.completions.stream({ ...ask, tools: [weatherTool], tool_choice: forceWeather }).finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    const streamed = final.choices[0]!.message.tool_calls!.map((c) => ({
      name: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.name,
      arguments: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments,
    }));
    const whole = plain.choices[0]!.message.tool_calls!.map((c) => ({
      name: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.name,
      arguments: (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments,
    }));
    expect(streamed).toEqual(whole);
  });

  it("a tool round trip: the call and its result go back in, the model answers", async () => {
    const first = await client.chat.completions.create({ ...ask, tools: [weatherTool], tool_choice: forceWeather });
    const assistant = first.choices[0]!.message;
    const call = assistant.tool_calls![0]!;
    const second = await client.chat.completions.create({
      model: MODEL,
      tools: [weatherTool],
      tool_choice: "auto",
      messages: [
        ...ask.messages,
        { role: "assistant", content: assistant.content, tool_calls: assistant.tool_calls },
        { role: "tool", tool_call_id: call.id, content: JSON.stringify({ city: "Paris", celsius: 21, sky: "clear" }) },
      ],
    });
    expect(second.choices[0]!.message.role).toBe("assistant");
    expect(["stop", "length", "tool_calls"]).toContain(second.choices[0]!.finish_reason);
    // The call and the tool's result are part of the prompt now.
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);

    const wrongId = await post({
      model: MODEL,
      messages: [
        ...ask.messages,
        { role: "assistant", content: null, tool_calls: assistant.tool_calls },
        { role: "tool", tool_call_id: "call_nobody", content: "21" },
      ],
    });
    expectOpenAiError(wrongId, 400, "invalid_request_error", { param: "messages[2].tool_call_id" });
  });

  it("tool_choice required with several tools: a call of one of them (the model's most probable), streamed or not", async () => {
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "lookup",
          description: "Look a word up",
          parameters: { type: "object", properties: { word: { type: "string" } } },
        },
      },
      weatherTool,
      {
        type: "function" as const,
        function: {
          name: "send_email",
          description: "Send an e-mail",
          parameters: { type: "object", properties: { to: { type: "string" } } },
        },
      },
    ];
    const names = tools.map((t) => t.function.name);
    const completion = await client.chat.completions.create({ ...ask, tools, tool_choice: "required" });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_[A-Za-z0-9]+$/);
    expect(call.type).toBe("function");
    expect(names).toContain(call.function.name);
    expect(typeof call.function.arguments).toBe("string");

    // The same reply as naming that tool: the choice is deterministic and then forced alike.
    const named = await client.chat.completions.create({
      ...ask,
      tools,
      tool_choice: { type: "function", function: { name: call.function.name } },
    });
    const namedCall = named.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(namedCall.function).toEqual(call.function);
    expect(named.usage).toEqual(completion.usage);

    // Streamed: the call's header (id, type, name) is in the first chunk that has tool_calls.
    const chunks = await streamAll({ tools, tool_choice: "required" });
    const first = chunks.find((c) => (c.choices[0]?.delta.tool_calls ?? []).length > 0)!;
    expect(first.choices[0]!.delta.tool_calls![0]).toMatchObject({
      index: 0,
      id: expect.stringMatching(/^call_/),
      type: "function",
      function: { name: call.function.name },
    });
    expect(chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter((r) => r !== null && r !== undefined)).toEqual([
      "tool_calls",
    ]);
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: completion.usage!.prompt_tokens });
    const final = await client.chat.completions.stream({ ...ask, tools, tool_choice: "required" }).finalChatCompletion();
    const streamed = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(streamed.function).toEqual(call.function);
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("tool_choice none: no tool calls come back", async () => {
    const completion = await client.chat.completions.create({ ...ask, tools: [weatherTool], tool_choice: "none" });
    expect(completion.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(completion.choices[0]!.finish_reason).not.toBe("tool_calls");
  });
});

describe("chat completions: thinking", () => {
  it("on: the thought is in reasoning, never in content", async () => {
    const params = { ...ask, chat_template_kwargs: { enable_thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const completion = await client.chat.completions.create(params);
    const message = completion.choices[0]!.message as Message;
    expect(typeof message.reasoning).toBe("string");
    expect(message.reasoning!.length).toBeGreaterThan(0);
    expect(message.content ?? "").not.toContain(message.reasoning!);
    expect(message.content ?? "").not.toMatch(/<\/?think>/);

    const chunks = await streamAll({ chat_template_kwargs: { enable_thinking: true } });
    expect(joined(chunks, "reasoning")).toBe(message.reasoning);
    expect(joined(chunks, "content")).toBe(message.content ?? "");
  });

  it("off (the default): no reasoning field, no thinking markup in content", async () => {
    for (const params of [ask, { ...ask, chat_template_kwargs: { enable_thinking: false } }]) {
      const completion = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const message = completion.choices[0]!.message as Message;
      expect(message.reasoning ?? "").toBe("");
      expect(message.content).not.toMatch(/<\/?think>/);
    }
  });
});

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
