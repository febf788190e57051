import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FinishReason, type GenerateResponse, GenerateResponseSchema, Role } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ResponseObjectSchema, ResponseStreamEventSchema } from "../schemas/responses-response.js";
import { createSseWriter } from "../sse.js";
import { parseResponsesRequest } from "./responses-request.js";
import { collectResponse, createResponseMeta } from "./responses-response.js";
import { type ResponseStreamOutcome, streamResponse } from "./responses-stream.js";

const started = (promptTokens = 12): GenerateResponse =>
  create(GenerateResponseSchema, { event: { case: "started", value: { model: "textmodel-26b", promptTokens, workerId: "w1" } } });
const delta = (init: {
  content?: string;
  reasoning?: string;
  toolCalls?: { index: number; id?: string; name?: string; arguments: string }[];
}): GenerateResponse => create(GenerateResponseSchema, { event: { case: "delta", value: init } });
const finished = (finishReason: FinishReason, promptTokens: number, completionTokens: number): GenerateResponse =>
  create(GenerateResponseSchema, {
    event: {
      case: "finished",
      value: { finishReason, usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens } },
    },
  });

describe("parseResponsesRequest", () => {
  it("maps items onto chat messages: one assistant turn for reasoning, text and its calls; a tool message per output", () => {
    const parsed = parseResponsesRequest({
      model: "m",
      instructions: "Be brief.",
      input: [
        { role: "user", content: "Weather in Paris and Lyon?" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Two cities." }] },
        {
          type: "message",
          role: "assistant",
          id: "msg_1",
          status: "completed",
          content: [{ type: "output_text", text: "Looking.", annotations: [] }],
        },
        { type: "function_call", id: "fc_1", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call", call_id: "call_b", name: "get_weather", arguments: '{"city":"Lyon"}' },
        { type: "function_call_output", call_id: "call_a", output: "21" },
        { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "19" }] },
      ],
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
      tool_choice: { type: "function", name: "get_weather" },
      text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } },
      reasoning: { effort: "medium" },
      max_output_tokens: 99,
    });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const { messages, options } = parsed.request;
    const text = (i: number) => messages[i]!.content.map((part) => (part.part.case === "text" ? part.part.value : "")).join("");
    expect(messages.map((m) => m.role)).toEqual([Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL]);
    expect(text(0)).toBe("Be brief.");
    expect(text(2)).toBe("Looking.");
    expect(messages[2]!.reasoning).toBe("Two cities.");
    expect(messages[2]!.toolCalls.map((c) => [c.id, c.name, c.arguments])).toEqual([
      ["call_a", "get_weather", '{"city":"Paris"}'],
      ["call_b", "get_weather", '{"city":"Lyon"}'],
    ]);
    expect(messages.slice(3).map((m) => [m.toolCallId, text(messages.indexOf(m))])).toEqual([
      ["call_a", "21"],
      ["call_b", "19"],
    ]);
    expect(options!.maxTokens).toBe(99);
    expect(options!.enableThinking).toBe(true);
    expect(options!.toolChoice!.choice).toEqual({ case: "functionName", value: "get_weather" });
    expect(options!.responseFormat!.jsonSchema).toEqual({ name: "w", schema: { type: "object" }, strict: true });
  });

  it("a function call with no assistant text before it is an assistant turn of its own; thinking is off by default", () => {
    const parsed = parseResponsesRequest({
      model: "m",
      input: [
        { role: "user", content: "hi" },
        { type: "function_call", call_id: "c", name: "f", arguments: "" },
        { type: "function_call_output", call_id: "c", output: "ok" },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.request.messages.map((m) => m.role)).toEqual([Role.USER, Role.ASSISTANT, Role.TOOL]);
    expect(parsed.request.messages[1]!.toolCalls[0]!.arguments).toBe("{}");
    expect(parsed.request.options!.enableThinking).toBe(false);
  });
});

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A /v1/responses server answering every request with the scripted generation. */
async function responsesServer(script: () => AsyncGenerator<GenerateResponse>) {
  const outcomes: ResponseStreamOutcome[] = [];
  const server = createServer(async (req, res) => {
    let text = "";
    for await (const chunk of req) text += String(chunk);
    const parsed = parseResponsesRequest(JSON.parse(text));
    if (!parsed.ok) throw new Error(parsed.error.message);
    const meta = createResponseMeta({ model: parsed.request.model, echo: parsed.echo });
    const countTokens = async (t: string) => t.length;
    if (!parsed.stream) {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await collectResponse(script(), meta, countTokens)));
      return;
    }
    const toError = (err: unknown) => ({ message: err instanceof Error ? err.message : "error", type: "api_error", code: "model_error" });
    outcomes.push(await streamResponse(createSseWriter(res, { heartbeatMs: 0 }), script(), meta, toError, countTokens));
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const baseURL = `http://127.0.0.1:${port}/v1`;
  return { client: new OpenAI({ apiKey: "tsr_test", baseURL, maxRetries: 0 }), outcomes, baseURL };
}

const ask = { model: "textmodel-26b", input: "Weather?" };

describe("streamResponse and the builder with the openai client", () => {
  it("reasoning, text and two calls: the items in the model's order, streamed and not alike", async () => {
    const { client, outcomes } = await responsesServer(async function* () {
      yield started(9);
      yield delta({ reasoning: "Two " });
      yield delta({ reasoning: "cities.", content: "Checking." });
      yield delta({ toolCalls: [{ index: 0, id: "call_a", name: "get_weather", arguments: '{"city":' }] });
      yield delta({
        toolCalls: [
          { index: 0, arguments: '"Paris"}' },
          { index: 1, id: "call_b", name: "get_weather", arguments: "{}" },
        ],
      });
      yield finished(FinishReason.TOOL_CALLS, 9, 30);
    });
    const plain = await client.responses.create(ask);
    const stream = client.responses.stream(ask);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const final = await stream.finalResponse();

    for (const event of events) expect(ResponseStreamEventSchema.safeParse(event).error).toBeUndefined();
    expect(ResponseObjectSchema.safeParse(plain).error).toBeUndefined();
    for (const response of [plain, final]) {
      expect(response.status).toBe("completed");
      expect(response.output.map((item) => item.type)).toEqual(["reasoning", "message", "function_call", "function_call"]);
      expect(response.output[0]).toMatchObject({ summary: [{ type: "summary_text", text: "Two cities." }] });
      expect(response.output_text).toBe("Checking.");
      expect(response.output.slice(2)).toMatchObject([
        { call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" },
        { call_id: "call_b", name: "get_weather", arguments: "{}", status: "completed" },
      ]);
      expect(response.usage).toEqual({
        input_tokens: 9,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 30,
        output_tokens_details: { reasoning_tokens: "Two cities.".length },
        total_tokens: 39,
      });
    }
    // Each item is closed before the next one opens.
    const itemEvents = events.filter((e) => e.type === "response.output_item.added" || e.type === "response.output_item.done");
    expect(
      itemEvents.map((e) => `${e.type.slice("response.output_item.".length)}:${(e as { output_index: number }).output_index}`),
    ).toEqual(["added:0", "done:0", "added:1", "done:1", "added:2", "done:2", "added:3", "done:3"]);
    expect(outcomes).toEqual([{ outcome: "done", promptTokens: 9, completionTokens: 30 }]);
  });

  it("a failure after the stream opened: an `error` event the SDK throws, then response.failed", async () => {
    const { client, outcomes, baseURL } = await responsesServer(async function* () {
      yield started(9);
      yield delta({ content: "Hel" });
      throw new Error("the worker went away");
    });
    const err = await client.responses
      .stream(ask)
      .finalResponse()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toMatch(/the worker went away/);
    await vi.waitFor(() => expect(outcomes[0]).toMatchObject({ outcome: "failed", promptTokens: 9, completionTokens: undefined }));

    const res = await fetch(`${baseURL}/responses`, { method: "POST", body: JSON.stringify({ ...ask, stream: true }) });
    const data = (await res.text())
      .split("\n\n")
      .filter((frame) => frame.startsWith("event: "))
      .map(
        (frame) =>
          JSON.parse(frame.split("\n")[1]!.slice("data: ".length)) as { type: string; response?: { status: string; error: unknown } },
      );
    expect(data.slice(-4).map((e) => e.type)).toEqual([
      "response.content_part.done",
      "response.output_item.done",
      "error",
      "response.failed",
    ]);
    expect(data.at(-1)!.response).toMatchObject({ status: "failed", error: { code: "model_error", message: "the worker went away" } });
    expect(data.at(-3)).toMatchObject({ item: { status: "incomplete" } });
  });
});
