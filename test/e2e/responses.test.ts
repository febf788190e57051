// POST /v1/responses end to end: the official `openai` client (6.49) over real HTTP against the
// embedded server serving the tiny test model. Its text is noise, but it is deterministic: a
// Responses request answers exactly what the chat completion it maps onto answers, which is
// what these tests pin down, with the shapes of OpenAI's objects and events, usage as charged,
// and the refusals of what needs stored state.
import OpenAI from "openai";
import { describe, expect, it, vi } from "vitest";
import { ResponseObjectSchema, ResponseStreamEventSchema } from "../../gateway/schemas/responses-response.js";
import { caughtApiError as caught, openaiClientFor, serveTesseraForFile } from "../helpers/openai.js";
import type { TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

serveTesseraForFile((served) => ({ tessera, client } = served));
const clientFor = (apiKey: string) => openaiClientFor(tessera, apiKey);

const MODEL = "textmodel-26b";
const QUESTION = "What is the weather like in Paris today?";
const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const weatherTool = { type: "function" as const, name: "get_weather", description: "Current weather of a city", parameters, strict: true };
const chatWeatherTool = {
  type: "function" as const,
  function: { name: "get_weather", description: "Current weather of a city", parameters },
};

/** The text of a response's message items, read from the items (not the SDK's `output_text`). */
const messageText = (response: OpenAI.Responses.Response) =>
  response.output
    .flatMap((item) => (item.type === "message" ? item.content : []))
    .map((part) => (part.type === "output_text" ? part.text : ""))
    .join("");

/** Text tokens the ledger has charged a key. */
async function charged(keyId: string): Promise<{ prompt: number; completion: number }> {
  const usage = await tessera.clients.accounting.getUsage({ keyId });
  return {
    prompt: usage.days.reduce((n, d) => n + Number(d.promptTokens), 0),
    completion: usage.days.reduce((n, d) => n + Number(d.completionTokens), 0),
  };
}

describe("responses: create", () => {
  it("answers OpenAI's response object: a message item, usage as charged, a request id", async () => {
    const key = await tessera.createKey();
    const before = Math.floor(Date.now() / 1000);
    const { data: response, response: raw } = await clientFor(key.apiKey)
      .responses.create({ model: MODEL, input: QUESTION })
      .withResponse();
    expect(raw.headers.get("x-request-id")).toMatch(/\S/);
    expect(ResponseObjectSchema.safeParse(response).error).toBeUndefined();
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(response.created_at).toBeGreaterThanOrEqual(before - 1);
    expect(response.model).toBe(MODEL);
    expect((response as { store?: boolean }).store).toBe(false);
    expect(["completed", "incomplete"]).toContain(response.status);
    expect(response.output).toHaveLength(1);
    const [message] = response.output;
    expect(message).toMatchObject({ type: "message", role: "assistant", id: expect.stringMatching(/^msg_/) });
    const content = (message as OpenAI.Responses.ResponseOutputMessage).content;
    expect(content).toEqual([{ type: "output_text", text: expect.any(String), annotations: [] }]);
    // The SDK's convenience field is built from the items.
    expect(response.output_text).toBe(messageText(response));

    const usage = response.usage!;
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    expect(usage.input_tokens_details.cached_tokens).toBe(0);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(0);
    expect(await charged(key.keyId)).toEqual({ prompt: usage.input_tokens, completion: usage.output_tokens });
  });

  it("is the chat completion it maps onto: same prompt tokens, same text (instructions → a system message)", async () => {
    const response = await client.responses.create({
      model: MODEL,
      instructions: "Answer in French.",
      input: QUESTION,
      metadata: { run: "1" },
    });
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "system", content: "Answer in French." },
        { role: "user", content: QUESTION },
      ],
    });
    expect(response.instructions).toBe("Answer in French.");
    expect(response.metadata).toEqual({ run: "1" });
    expect(response.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(response.usage!.output_tokens).toBe(chat.usage!.completion_tokens);
    expect(messageText(response)).toBe(chat.choices[0]!.message.content);
    expect(response.status).toBe(chat.choices[0]!.finish_reason === "length" ? "incomplete" : "completed");

    // Message items with parts and roles, developer as system, are the same prompt.
    const items = await client.responses.create({
      model: MODEL,
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "Answer in French." }] },
        { role: "user", content: [{ type: "input_text", text: QUESTION }] },
      ],
    });
    expect(items.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(messageText(items)).toBe(chat.choices[0]!.message.content);

    // Several parts are several parts of one chat message (the engine joins them as chat's).
    const parts = ["Weather?", "Paris, today."];
    const split = await client.responses.create({
      model: MODEL,
      input: [{ role: "user", content: parts.map((text) => ({ type: "input_text", text })) }],
    });
    const splitChat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: parts.map((text) => ({ type: "text", text })) }],
    });
    expect(split.usage!.input_tokens).toBe(splitChat.usage!.prompt_tokens);
  });

  it("a large body is validated off the event loop (the body worker) and answered the same", async () => {
    const small = await client.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 4 });
    // An ignored field makes the body large without changing the prompt.
    const large = await client.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 4, user: "u".repeat(300_000) });
    expect(large.usage).toEqual(small.usage);
    expect(messageText(large)).toBe(messageText(small));
    const refused = await caught(client.responses.create({ model: MODEL, input: QUESTION, store: true, user: "u".repeat(300_000) }));
    expect(refused.param).toBe("store");
  });

  it("max_output_tokens: status incomplete, incomplete_details.reason max_output_tokens", async () => {
    const response = await client.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 5 });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.max_output_tokens).toBe(5);
    expect(response.usage!.output_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeLessThanOrEqual(5);
    expect((response.output.at(-1) as { status: string }).status).toBe("incomplete");
  });

  it("reasoning turns thinking on: a reasoning item first, its text the chat reply's reasoning, reasoning_tokens counted", async () => {
    const response = await client.responses.create({ model: MODEL, input: QUESTION, reasoning: { effort: "low" } });
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: QUESTION }],
      // @ts-expect-error Tessera's (and vLLM's) switch, unknown to the SDK's types
      chat_template_kwargs: { enable_thinking: true },
    });
    const reasoning = (chat.choices[0]!.message as { reasoning?: string }).reasoning!;
    expect(reasoning.length).toBeGreaterThan(0);
    const [first] = response.output;
    expect(first).toMatchObject({ type: "reasoning", id: expect.stringMatching(/^rs_/) });
    expect((first as OpenAI.Responses.ResponseReasoningItem).summary).toEqual([{ type: "summary_text", text: reasoning }]);
    expect(messageText(response)).toBe(chat.choices[0]!.message.content ?? "");
    const usage = response.usage!;
    expect(usage.output_tokens).toBe(chat.usage!.completion_tokens);
    expect(usage.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens_details.reasoning_tokens).toBeLessThanOrEqual(usage.output_tokens);

    const off = await client.responses.create({ model: MODEL, input: QUESTION, reasoning: { effort: "none" } });
    expect(off.output.map((item) => item.type)).not.toContain("reasoning");
  });
});

describe("responses: function tools", () => {
  it("a round trip: function_call item (call_id, name, arguments), then function_call_output in the next call", async () => {
    const first = await client.responses.create({
      model: MODEL,
      input: QUESTION,
      tools: [weatherTool],
      tool_choice: { type: "function", name: "get_weather" },
    });
    expect(first.tool_choice).toEqual({ type: "function", name: "get_weather" });
    expect(first.tools).toMatchObject([{ type: "function", name: "get_weather", parameters }]);
    const calls = first.output.filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === "function_call");
    expect(calls).toHaveLength(1);
    const call = calls[0]!;
    expect(call).toMatchObject({ name: "get_weather", call_id: expect.stringMatching(/\S/), id: expect.stringMatching(/^fc_/) });
    expect(typeof call.arguments).toBe("string");

    // As OpenAI's guide does it: the output items go back in, then the tool's result.
    const result = JSON.stringify({ city: "Paris", celsius: 21, sky: "clear" });
    const second = await client.responses.create({
      model: MODEL,
      tools: [weatherTool],
      input: [
        { role: "user", content: QUESTION },
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { type: "function_call_output", call_id: call.call_id, output: result },
      ],
    });
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    // The chat request it maps onto: an assistant turn with the call, then a tool message.
    const chat = await client.chat.completions.create({
      model: MODEL,
      tools: [chatWeatherTool],
      messages: [
        { role: "user", content: QUESTION },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: call.call_id, type: "function", function: { name: call.name, arguments: call.arguments } }],
        },
        { role: "tool", tool_call_id: call.call_id, content: result },
      ],
    });
    expect(second.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(messageText(second)).toBe(chat.choices[0]!.message.content ?? "");

    const orphan = await caught(
      client.responses.create({
        model: MODEL,
        input: [
          { role: "user", content: "hi" },
          { type: "function_call_output", call_id: "call_nobody", output: "21" },
        ],
      }),
    );
    expect(orphan).toBeInstanceOf(OpenAI.BadRequestError);
    expect(orphan.param).toBe("input[1].call_id");
  });

  it("tool_choice required, streamed: function_call_arguments deltas add up to the call of the JSON answer", async () => {
    const params = { model: MODEL, input: QUESTION, tools: [weatherTool], tool_choice: "required" as const };
    const plain = await client.responses.create(params);
    const stream = client.responses.stream(params);
    const deltas: string[] = [];
    let done: OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent | undefined;
    stream.on("response.function_call_arguments.delta", (event) => deltas.push(event.delta));
    stream.on("response.function_call_arguments.done", (event) => {
      done = event;
    });
    const final = await stream.finalResponse();
    const call = final.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    const plainCall = plain.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).toBe("get_weather");
    expect(call.arguments).toBe(plainCall.arguments);
    expect(deltas.join("")).toBe(call.arguments);
    expect(done).toMatchObject({ name: "get_weather", arguments: call.arguments, item_id: call.id });
  });
});

describe("responses: streaming", () => {
  it("the stream helper: the documented events in order, numbered, adding up to the JSON answer", async () => {
    const params = { model: MODEL, input: QUESTION };
    const plain = await client.responses.create(params);
    const stream = client.responses.stream(params);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const final = await stream.finalResponse();

    for (const event of events) expect(ResponseStreamEventSchema.safeParse(event).error).toBeUndefined();
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const types = events.map((e) => e.type);
    const deltas = types.filter((t) => t === "response.output_text.delta").length;
    expect(deltas).toBeGreaterThan(0);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(deltas).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      plain.status === "completed" ? "response.completed" : "response.incomplete",
    ]);
    const created = events[0] as OpenAI.Responses.ResponseCreatedEvent;
    expect(created.response).toMatchObject({ id: final.id, status: "in_progress", output: [] });
    expect(final.id).toMatch(/^resp_/);
    expect(final.output_text).toBe(messageText(plain));
    expect(final.usage).toEqual(plain.usage);
  });

  it("on the wire: `event:` lines naming each data's type, no [DONE]; stream: true through create()", async () => {
    const res = await tessera.fetch("/v1/responses", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: QUESTION, stream: true, max_output_tokens: 5 }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = (await res.text()).split("\n\n").filter((f) => f.startsWith("event: "));
    for (const frame of frames) {
      const [eventLine, dataLine] = frame.split("\n");
      expect(JSON.parse(dataLine!.slice("data: ".length)).type).toBe(eventLine!.slice("event: ".length));
    }
    expect(frames.at(-1)).toMatch(/^event: response.incomplete\n/);

    const stream = await client.responses.create({ model: MODEL, input: QUESTION, stream: true, reasoning: { effort: "high" } });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.reasoning_summary_part.added",
    ]);
    expect(types).toContain("response.reasoning_summary_text.delta");
    expect(types).toContain("response.reasoning_summary_text.done");
  });
});

describe("responses: refusals and errors", () => {
  it("store: true, previous_response_id, background: true → 400 naming the field; store: false is fine", async () => {
    const refused = [
      [{ store: true }, "store"],
      [{ previous_response_id: "resp_123" }, "previous_response_id"],
      [{ background: true }, "background"],
    ] as const;
    for (const [extra, param] of refused) {
      const err = await caught(client.responses.create({ model: MODEL, input: QUESTION, ...extra }));
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe(param);
      expect(err.type).toBe("invalid_request_error");
      expect(err.message).toMatch(/stateless/);
    }
    const fine = await client.responses.create({ model: MODEL, input: QUESTION, store: false, max_output_tokens: 3 });
    expect((fine as { store?: boolean }).store).toBe(false);
    const reference = await caught(client.responses.create({ model: MODEL, input: [{ type: "item_reference", id: "msg_1" }] }));
    expect(reference.param).toBe("input[0]");
    // Nothing to retrieve, even the id of a response just given: a 404 that says why.
    const retrieved = await caught(client.responses.retrieve(fine.id));
    expect(retrieved).toBeInstanceOf(OpenAI.NotFoundError);
    expect(retrieved.message).toMatch(/not found: this server keeps no responses/);
  });

  it("unsupported tools and parts are 400s naming them; an unknown model is 404", async () => {
    const tool = await caught(client.responses.create({ model: MODEL, input: QUESTION, tools: [{ type: "web_search" }] }));
    expect(tool.param).toBe("tools[0].type");
    const image = await caught(
      client.responses.create({
        model: MODEL,
        input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png", detail: "auto" }] }],
      }),
    );
    expect(image.param).toBe("input[0].content[0].type");
    const missing = await caught(client.responses.create({ model: "no-such-model", input: QUESTION }));
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing.code).toBe("model_not_found");
  });

  it("an unknown key: 401 the SDK reads; a used-up quota: 429 insufficient_quota, streamed or not", async () => {
    const err = await caught(clientFor("tsr_unknown").responses.create({ model: MODEL, input: QUESTION }));
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.message).not.toContain("no body");
    expect(err.type).toBe("authentication_error");

    const poor = await tessera.createKey({ textQuota: 30 });
    for (const stream of [false, true]) {
      const quota = await caught(clientFor(poor.apiKey).responses.create({ model: MODEL, input: QUESTION, stream }));
      expect(quota).toBeInstanceOf(OpenAI.RateLimitError);
      expect(quota.type).toBe("insufficient_quota");
    }
  });

  it("a stream the client leaves after the first text is charged its prompt and what it got, not max_output_tokens", async () => {
    const { apiKey, accountId } = await tessera.createKey({ textQuota: 10_000_000 });
    const controller = new AbortController();
    const res = await tessera.fetch("/v1/responses", {
      method: "POST",
      key: apiKey,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "Count to ten.", max_output_tokens: 2048, stream: true }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let read = "";
    while (!read.includes("event: response.output_text.delta")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended before any text");
      read += new TextDecoder().decode(value);
    }
    controller.abort();
    const prompt = (await client.responses.create({ model: MODEL, input: "Count to ten.", max_output_tokens: 1 })).usage!.input_tokens;
    await vi.waitFor(async () => {
      const { account } = await tessera.clients.accounting.getAccount({ accountId });
      expect(account!.textReservedTokens).toBe(0n);
      expect(Number(account!.textUsedTokens)).toBeGreaterThan(prompt);
      expect(Number(account!.textUsedTokens)).toBeLessThan(prompt + 2048);
    });
  });

  it("a streamed response is charged its usage", async () => {
    const key = await tessera.createKey();
    const final = await clientFor(key.apiKey).responses.stream({ model: MODEL, input: QUESTION }).finalResponse();
    await vi.waitFor(async () => {
      expect(await charged(key.keyId)).toEqual({ prompt: final.usage!.input_tokens, completion: final.usage!.output_tokens });
    });
  });
});
