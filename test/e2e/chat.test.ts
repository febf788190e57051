// POST /v1/chat/completions end to end: the official `openai` client over real HTTP against the
// embedded server serving the tiny test model (test/fixtures/tiny-model). The tiny model has
// random weights, so its text is noise; what these tests pin down is the shape and the rules
// (JSON modes, tools, thinking, length, streaming), which hold whatever the text is. Errors and
// overload: chat-errors.test.ts.
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, clientFor, expectOpenAiError, forceWeather, MODEL, postChat, weatherTool } from "../helpers/chat-e2e.js";
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
