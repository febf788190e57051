import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { FinishReason, GenerateResponseSchema, type GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import { createSseWriter } from "../sse.js";
import {
  completionFromEvents,
  createChunkBuilder,
  createCompletionMeta,
  IncompleteGeneration,
  parseChatRequest,
  streamCompletion,
  type ChatCompletionChunk,
  type StreamOutcome,
} from "./chat.js";

const started = (promptTokens = 12, model = "textmodel-26b"): GenerateResponse =>
  create(GenerateResponseSchema, { event: { case: "started", value: { model, promptTokens, workerId: "w1" } } });
const delta = (init: {
  content?: string;
  reasoning?: string;
  toolCalls?: { index: number; id?: string; name?: string; arguments: string }[];
  blockIndex?: number;
}): GenerateResponse => create(GenerateResponseSchema, { event: { case: "delta", value: init } });
const finished = (finishReason: FinishReason, promptTokens: number, completionTokens: number): GenerateResponse =>
  create(GenerateResponseSchema, {
    event: {
      case: "finished",
      value: { finishReason, usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }, forwardPasses: 3 },
    },
  });

const meta = (reasoning = false) =>
  createCompletionMeta({ model: "textmodel-26b", reasoning, id: "chatcmpl-test", created: 1_700_000_000 });

describe("completionFromEvents", () => {
  it("builds the chat.completion object", () => {
    const completion = completionFromEvents(
      [started(12), delta({ content: "Hello" }), delta({ content: ", world." }), finished(FinishReason.STOP, 12, 4)],
      meta(),
    );
    expect(completion).toEqual({
      id: "chatcmpl-test",
      object: "chat.completion",
      created: 1_700_000_000,
      model: "textmodel-26b",
      choices: [{ index: 0, message: { role: "assistant", content: "Hello, world." }, finish_reason: "stop", logprobs: null }],
      usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
    });
  });

  it("carries reasoning when thinking is on, even when empty", () => {
    const thought = completionFromEvents(
      [started(), delta({ reasoning: "Think." }), delta({ content: "Answer." }), finished(FinishReason.STOP, 12, 5)],
      meta(true),
    );
    expect(thought.choices[0]!.message).toEqual({ role: "assistant", content: "Answer.", reasoning: "Think." });
    const empty = completionFromEvents([started(), delta({ content: "A" }), finished(FinishReason.STOP, 12, 1)], meta(true));
    expect(empty.choices[0]!.message.reasoning).toBe("");
    const off = completionFromEvents([started(), delta({ content: "A" }), finished(FinishReason.STOP, 12, 1)], meta(false));
    expect(off.choices[0]!.message).not.toHaveProperty("reasoning");
  });

  it("joins tool-call pieces by index; content is null and finish_reason tool_calls", () => {
    const completion = completionFromEvents(
      [
        started(),
        delta({ toolCalls: [{ index: 0, id: "call_a", name: "get_weather", arguments: "" }] }),
        delta({
          toolCalls: [
            { index: 0, arguments: '{"city":"Paris"}' },
            { index: 1, id: "call_b", name: "get_time", arguments: "{}" },
          ],
        }),
        finished(FinishReason.STOP, 12, 20),
      ],
      meta(),
    );
    expect(completion.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
        ],
      },
      finish_reason: "tool_calls",
      logprobs: null,
    });
  });

  it("maps every finish reason", () => {
    const reason = (r: FinishReason) => completionFromEvents([started(), finished(r, 1, 1)], meta()).choices[0]!.finish_reason;
    expect(reason(FinishReason.STOP)).toBe("stop");
    expect(reason(FinishReason.LENGTH)).toBe("length");
    expect(reason(FinishReason.TOOL_CALLS)).toBe("tool_calls");
    expect(reason(FinishReason.UNSPECIFIED)).toBe("stop");
  });

  it("reports the model that answered and an empty reply as an empty string", () => {
    const completion = completionFromEvents([started(3, "textmodel-26b-v2"), finished(FinishReason.STOP, 3, 0)], meta());
    expect(completion.model).toBe("textmodel-26b-v2");
    expect(completion.choices[0]!.message.content).toBe("");
  });

  it("refuses a generation without its Finished event", () => {
    expect(() => completionFromEvents([started(), delta({ content: "x" })], meta())).toThrow(IncompleteGeneration);
  });
});

describe("chunk builder", () => {
  it("with include_usage: the role first, a chunk per delta, the finish reason, then usage with no choices", () => {
    const builder = createChunkBuilder(meta(true), { includeUsage: true });
    const chunks = [
      started(7),
      delta({ reasoning: "hmm" }),
      delta({}),
      delta({ content: "Hi", toolCalls: [{ index: 0, id: "call_1", name: "f", arguments: "" }] }),
      delta({ toolCalls: [{ index: 0, arguments: "{}" }] }),
      finished(FinishReason.TOOL_CALLS, 7, 9),
    ].flatMap((e) => builder.fromEvent(e));
    const deltas = chunks.map((c) => c.choices[0]?.delta);
    expect(deltas).toEqual([
      { role: "assistant", content: "" },
      { reasoning: "hmm" },
      { content: "Hi", tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: "{}" } }] },
      {},
      undefined,
    ]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason ?? null)).toEqual([null, null, null, null, "tool_calls", null]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 7, completion_tokens: 9, total_tokens: 16 });
    for (const chunk of chunks)
      expect(chunk).toMatchObject({ id: "chatcmpl-test", object: "chat.completion.chunk", created: 1_700_000_000, model: "textmodel-26b" });
    expect(builder.usage).toEqual({ promptTokens: 7, completionTokens: 9 });
    expect(builder.deltasSent).toBe(3);
  });

  it("without include_usage: the usage rides on the finish-reason chunk, and every chunk has a choice", () => {
    const builder = createChunkBuilder(meta());
    const chunks = [started(4), delta({ content: "Hi" }), finished(FinishReason.STOP, 4, 2)].flatMap((e) => builder.fromEvent(e));
    expect(chunks.map((c) => c.choices.length)).toEqual([1, 1, 1]);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 });
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
  });

  it("ends with tool_calls when calls were streamed and the engine said stop", () => {
    const builder = createChunkBuilder(meta());
    builder.fromEvent(started());
    builder.fromEvent(delta({ toolCalls: [{ index: 0, id: "c", name: "f", arguments: "{}" }] }));
    const [last] = builder.fromEvent(finished(FinishReason.STOP, 1, 1));
    expect(last!.choices[0]!.finish_reason).toBe("tool_calls");
  });
});

// ---------------------------------------------------------------------------------------------
// The builders and the stream loop against the official OpenAI client, over real HTTP. The
// generation is scripted; the server is a minimal route: parse, then JSON or SSE.

type Script = (signal: AbortSignal) => AsyncIterable<GenerateResponse>;

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function chatServer(script: Script): Promise<{ client: OpenAI; outcomes: StreamOutcome[] }> {
  const outcomes: StreamOutcome[] = [];
  const server = createServer(async (req, res) => {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    let text = "";
    for await (const chunk of req) text += String(chunk);
    const parsed = parseChatRequest(JSON.parse(text));
    if (!parsed.ok) return json(400, { error: { ...parsed.error, type: "invalid_request_error" } });
    const m = createCompletionMeta({ model: parsed.request.model, reasoning: parsed.request.options!.enableThinking });
    const toError = (err: unknown) => ({ message: err instanceof Error ? err.message : "error", type: "api_error", code: "model_error" });
    try {
      if (!parsed.stream) {
        const all: GenerateResponse[] = [];
        for await (const e of script(new AbortController().signal)) all.push(e);
        return json(200, completionFromEvents(all, m));
      }
      const sse = createSseWriter(res, { heartbeatMs: 0 });
      outcomes.push(await streamCompletion(sse, script(sse.signal), m, toError, { includeUsage: parsed.includeUsage }));
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.ResourceExhausted) {
        res.setHeader("retry-after", "1");
        return json(529, { error: { message: err.rawMessage, type: "overloaded_error", code: "overloaded" } });
      }
      json(500, { error: { message: "unexpected", type: "api_error", code: null } });
    }
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { client: new OpenAI({ apiKey: "tsr_test", baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 }), outcomes };
}

const ask = { model: "textmodel-26b", messages: [{ role: "user" as const, content: "Hi" }] };

describe("streamCompletion and the builders with the openai client", () => {
  it("plain completion", async () => {
    const { client } = await chatServer(async function* () {
      yield started(9);
      yield delta({ content: "Hello!" });
      yield finished(FinishReason.STOP, 9, 2);
    });
    const completion = await client.chat.completions.create(ask);
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]!.message.content).toBe("Hello!");
    expect(completion.choices[0]!.finish_reason).toBe("stop");
    expect(completion.usage).toEqual({ prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 });
  });

  it("streamed: role first, reasoning and content deltas, usage in the last chunk before [DONE]", async () => {
    const { client, outcomes } = await chatServer(async function* () {
      yield started(9);
      yield delta({ reasoning: "Greeting.", blockIndex: 0 });
      yield delta({ content: "Hel", blockIndex: 0 });
      yield delta({ content: "lo!", blockIndex: 1 });
      yield finished(FinishReason.STOP, 9, 70);
    });
    const stream = await client.chat.completions.create({
      ...ask,
      stream: true,
      stream_options: { include_usage: true },
      chat_template_kwargs: { enable_thinking: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk as unknown as ChatCompletionChunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Hello!");
    expect(chunks.map((c) => c.choices[0]?.delta.reasoning ?? "").join("")).toBe("Greeting.");
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe("stop");
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 9, completion_tokens: 70, total_tokens: 79 });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(outcomes).toEqual([{ outcome: "done", promptTokens: 9, completionTokens: 70, deltasSent: 3 }]);
  });

  it("streamed tool calls add up in the SDK's stream helper", async () => {
    const { client } = await chatServer(async function* () {
      yield started(30);
      yield delta({ toolCalls: [{ index: 0, id: "call_x", name: "get_weather", arguments: "" }] });
      yield delta({ toolCalls: [{ index: 0, arguments: '{"city":"Paris"}' }] });
      yield finished(FinishReason.TOOL_CALLS, 30, 12);
    });
    const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object" } } }];
    const runner = client.chat.completions.stream({ ...ask, tools, tool_choice: { type: "function", function: { name: "get_weather" } } });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(final.choices[0]!.message.tool_calls).toEqual([
      { id: "call_x", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
    ]);
  });

  it("an error after the stream started reaches the client as an error, and the stream ends", async () => {
    const { client, outcomes } = await chatServer(async function* () {
      yield started(9);
      yield delta({ content: "Par" });
      throw new ConnectError("the model failed on this request", Code.Unavailable);
    });
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? "");
      })(),
    ).rejects.toMatchObject({ message: expect.stringContaining("the model failed on this request") });
    expect(seen.join("")).toBe("Par");
    expect(outcomes[0]).toMatchObject({ outcome: "failed", promptTokens: 9, completionTokens: undefined, deltasSent: 1 });
  });

  it("a stream that ends without Finished is an error event, not a hang", async () => {
    const { client, outcomes } = await chatServer(async function* () {
      yield started(9);
      yield delta({ content: "x" });
    });
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    await expect(
      (async () => {
        for await (const _ of stream) void _;
      })(),
    ).rejects.toThrow(/without finishing/);
    expect(outcomes[0]!.outcome).toBe("failed");
  });

  it("a refusal before the first event keeps its own HTTP status (529), nothing streamed", async () => {
    // biome-ignore lint/correctness/useYield: the refusal must come from the stream's first read, as a real engine's does
    const { client, outcomes } = await chatServer(async function* () {
      throw new ConnectError("all generation slots are busy", Code.ResourceExhausted);
    });
    const error = await client.chat.completions.create({ ...ask, stream: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(529);
    expect(outcomes).toEqual([]);
  });

  it("a client that leaves cancels the generation", async () => {
    let cancelled!: () => void;
    const cancellation = new Promise<void>((r) => (cancelled = r));
    const { client } = await chatServer(async function* (signal) {
      try {
        yield started(9);
        for (let i = 0; ; i++) {
          if (signal.aborted) return;
          yield delta({ content: `block ${i} ` });
          await new Promise((r) => setTimeout(r, 10));
        }
      } finally {
        cancelled();
      }
    });
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let n = 0;
    for await (const _ of stream) if (++n === 3) break;
    await cancellation;
  });
});
