// DiffusionGemma end to end: the official `openai` client over real HTTP against the embedded
// server serving the tiny converted DiffusionGemma (contract v3, decoded on canvases). Random
// weights, so the text is noise; what is pinned down is the shape (chat, stream, usage, finish
// reasons, logprobs, stop sequences, raw completions, the live denoising view's canvas steps).
// JSON modes and forced / auto tool calls under the grammar: diffusion-gemma-structured.test.ts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { parseSpecialTokens } from "../../services/inference/core/model-config.js";
import { createTextTokenizer, type TextTokenizer } from "../../services/inference/prompt/tokenizer.js";
import { createReplyParser } from "../../services/inference/reply/reply-parser.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const MODEL = "textmodel-26b";
const ask = { model: MODEL, messages: [{ role: "user" as const, content: "Hello! How can I help you today?" }] };

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma (canvas model) through the openai client", () => {
  let tessera: TestTessera;
  let client: OpenAI;
  let tokenizer: TextTokenizer;
  let stopTokenIds: number[];
  // The reply's content as the chat reply parser makes it of the reply's text (no tools asked):
  // whitespace around it trimmed, a thinking span the noise happens to open moved to reasoning.
  let contentOf: (text: string) => string;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    const json = (name: string) => JSON.parse(readFileSync(join(fx.model, name), "utf8")) as Record<string, unknown>;
    tokenizer = createTextTokenizer(json("tokenizer.json"), json("tokenizer_config.json"));
    stopTokenIds = json("config.json").stop_token_ids as number[];
    const tags = parseSpecialTokens(json("config.json").special_tokens, "config.json");
    contentOf = (text) => {
      const parser = createReplyParser({ thinking: false, jsonMode: false, toolCalls: false, tags });
      return parser.push(text).content + parser.finish().content;
    };
    tessera = await startTestTessera({ modelDir: fx.model });
    client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  it("chat: a reply, its finish reason and usage (max_tokens reached across canvases of 16)", async () => {
    const r = await client.chat.completions.create({ ...ask, max_tokens: 40 });
    const choice = r.choices[0]!;
    expect(typeof choice.message.content).toBe("string");
    expect(["stop", "length"]).toContain(choice.finish_reason);
    expect(r.usage!.prompt_tokens).toBeGreaterThan(5);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(40);
    if (choice.finish_reason === "length") expect(r.usage!.completion_tokens).toBe(40);
    // Tokens per step in the engine metrics: accepted tokens per denoising step, steps per canvas.
    const metrics = await (await tessera.fetch("/metrics", { key: null })).text();
    expect(metrics).toMatch(/tessera_committed_tokens_per_forward_count\{model="[^"]+",policy="canvas"\} [1-9]/);
    expect(metrics).toMatch(/tessera_forwards_per_block_count\{model="[^"]+",policy="canvas"\} [1-9]/);
  }, 120_000);

  it("stream: content arrives as canvases finish, then the finish reason and usage", async () => {
    const stream = await client.chat.completions.create({ ...ask, max_tokens: 48, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    const finish = chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason;
    const usage = chunks.find((c) => c.usage)?.usage;
    expect(["stop", "length"]).toContain(finish);
    expect(usage!.completion_tokens).toBeGreaterThan(0);
    expect(content.length).toBeGreaterThan(0);
    expect(chunks.filter((c) => (c.choices[0]?.delta.content ?? "") !== "").length).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it("logprobs: one entry per reply token, the token its step's most probable, its bytes spelling the reply", async () => {
    const r = await client.chat.completions.create({ ...ask, max_tokens: 40, logprobs: true, top_logprobs: 3 });
    const choice = r.choices[0]!;
    const entries = choice.logprobs!.content!;
    expect(entries.length).toBe(r.usage!.completion_tokens);
    for (const e of entries) {
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(e.top_logprobs.length).toBe(3);
      // The reply token is the argmax of its canvas's last step: first among its alternatives.
      expect(e.top_logprobs[0]!.token).toBe(e.token);
      expect(e.top_logprobs[0]!.logprob).toBeCloseTo(e.logprob, 9);
      expect(e.top_logprobs[1]!.logprob).toBeLessThanOrEqual(e.top_logprobs[0]!.logprob);
    }
    expect(contentOf(Buffer.concat(entries.map((e) => Buffer.from(e.bytes!))).toString("utf8"))).toBe(choice.message.content);
  }, 120_000);

  it("stop sequences, streamed with logprobs and the denoising view: the reply ends at the canvas where one appears, cut before it", async () => {
    const stop = ["e", "o", " ", "a"]; // among the commonest characters of the tiny model's noise
    const params = {
      ...ask,
      max_tokens: 160,
      stop,
      logprobs: true,
      stream: true,
      stream_options: { include_usage: true, include_denoising: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming;
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of await client.chat.completions.create(params)) chunks.push(chunk);
    type Step = {
      block: number;
      step: number;
      block_size: number;
      masked: number;
      canvas_final?: boolean;
      canvas?: { token_id: number; text: string; accepted: boolean }[];
    };
    const steps = chunks.flatMap((c) => (c as { denoising?: Step }).denoising ?? []);
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    const entries = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    const usage = chunks.find((c) => c.usage)!.usage!;
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe("stop");
    for (const s of stop) expect(content).not.toContain(s);
    expect(entries.length).toBe(usage.completion_tokens);

    // Every step shows the whole canvas: its draft tokens, accepted or renoised.
    expect(steps.length).toBeGreaterThan(0);
    for (const s of steps) {
      expect(s.canvas!.length).toBe(s.block_size);
      expect(s.canvas!.filter((c) => !c.accepted).length).toBe(s.masked);
    }
    // The finished canvases, in order, as their last steps show them; the reply is their tokens
    // up to the model's stop token, and the reply's entries are its first tokens.
    const finals = steps.filter((s) => s.canvas_final === true);
    expect(finals.map((s) => s.block)).toEqual(finals.map((_, i) => i));
    const ids = finals.flatMap((s) => s.canvas!.map((c) => c.token_id));
    const stopToken = ids.findIndex((id) => stopTokenIds.includes(id));
    const replyIds = stopToken < 0 ? ids : ids.slice(0, stopToken);
    expect(entries.map((e) => e.token)).toEqual(replyIds.slice(0, entries.length).map((id) => tokenizer.decode([id])));
    // The reply is cut before the first stop sequence in its text, which the last canvas
    // brought (no canvas after it was denoised), unless the stop token came first.
    const text = tokenizer.decode(replyIds);
    const first = Math.min(...stop.map((s) => text.indexOf(s)).filter((i) => i >= 0));
    expect(content).toBe(contentOf(Number.isFinite(first) ? text.slice(0, first) : text));
    const beforeLast = tokenizer.decode(finals.slice(0, -1).flatMap((s) => s.canvas!.map((c) => c.token_id)));
    for (const s of stop) expect(beforeLast).not.toContain(s);
  }, 120_000);

  it("a raw completion (/v1/completions): the prompt as it is, legacy logprobs, a stop sequence", async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: "The quick brown fox",
      max_tokens: 48,
      logprobs: 2,
      stop: ["e", "o"],
    });
    const choice = r.choices[0]!;
    expect(r.usage!.prompt_tokens).toBe(tokenizer.encode("The quick brown fox").length);
    expect(choice.finish_reason).toBe("stop");
    expect(choice.text).not.toMatch(/[eo]/);
    const lp = choice.logprobs!;
    expect(lp.tokens!.length).toBe(r.usage!.completion_tokens);
    expect(lp.token_logprobs!.every((x) => x <= 0)).toBe(true);
    expect(lp.top_logprobs!.every((alts) => Object.keys(alts).length >= 1)).toBe(true);
    // Each token's text on its own: a character split across byte tokens shows as U+FFFD in each.
    const spelled = lp.tokens!.join("");
    if (!spelled.includes("\ufffd")) expect(spelled.startsWith(choice.text)).toBe(true);
    // echo: the prompt's tokens first (null logprobs: the engine does not score the prompt), then the reply's.
    const echoed = await client.completions.create({ model: MODEL, prompt: "The quick brown fox", max_tokens: 8, logprobs: 1, echo: true });
    const promptTokens = echoed.usage!.prompt_tokens;
    expect(echoed.choices[0]!.text.startsWith("The quick brown fox")).toBe(true);
    expect(echoed.choices[0]!.logprobs!.token_logprobs!.slice(0, promptTokens).every((x) => x === null)).toBe(true);
    expect(echoed.choices[0]!.logprobs!.tokens!.length).toBe(promptTokens + echoed.usage!.completion_tokens);
  }, 120_000);

  it("tools (auto) and a tool message round trip: the reply's shape, tool_calls parsed where the model wrote one", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "The weather in a city",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" },
    ];
    const withTools = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 32 });
    const choice = withTools.choices[0]!;
    expect(["stop", "length", "tool_calls"]).toContain(choice.finish_reason);
    if (choice.finish_reason === "tool_calls") {
      expect(choice.message.tool_calls!.length).toBeGreaterThan(0);
      for (const call of choice.message.tool_calls!) {
        expect(call.type).toBe("function");
        expect(call.id).toMatch(/^call_/);
        expect(typeof JSON.parse((call as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments)).toBe("object");
      }
    } else {
      expect(typeof choice.message.content).toBe("string");
    }
    // The tool message and the earlier call are in the prompt the template rendered: more tokens than without them,
    // counted the same by a stream.
    const without = await client.chat.completions.create({ model: MODEL, messages: messages.slice(0, 1), tools, max_tokens: 1 });
    expect(withTools.usage!.prompt_tokens).toBeGreaterThan(without.usage!.prompt_tokens + 10);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      max_tokens: 32,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage ??= chunk.usage ?? undefined;
    expect(usage!.prompt_tokens).toBe(withTools.usage!.prompt_tokens);
    // Thinking (chat_template_kwargs.enable_thinking, the gateway's mapping): accepted, its switch in the prompt.
    const thinking = await client.chat.completions.create({
      ...ask,
      max_tokens: 8,
      chat_template_kwargs: { enable_thinking: true },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const plain = await client.chat.completions.create({ ...ask, max_tokens: 8 });
    expect(thinking.usage!.prompt_tokens).toBeGreaterThan(plain.usage!.prompt_tokens);
  }, 120_000);

  it("a decision through /v1/systemone: the canvas readout, probabilities that sum to 1, the same answers asked again", async () => {
    const request = JSON.stringify({
      model: "decisionmodel-0.1",
      state: { order: "A-1092", note: "The weather in Paris is sunny today." },
      questions: {
        sunny: { type: "noul", instructions: "Is the weather good?", criteria: { true: "sunny", false: "rain" } },
        city: { type: "choice", instructions: "Which city?", criteria: { Paris: null, London: "the capital", Rome: null } },
        effort: { type: "score", criteria: ["low", "medium", "high"] },
      },
    });
    const decide = async () => {
      const res = await tessera.fetch("/v1/systemone", { method: "POST", headers: { "content-type": "application/json" }, body: request });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      return JSON.parse(text) as {
        answers: Record<string, { type: string; noul?: number; choice?: string; probabilities?: Record<string, number> }>;
        usage: { input_tokens: number; output_tokens: number };
      };
    };
    const body = await decide();
    expect(body.answers.sunny!.type).toBe("noul");
    expect(body.answers.sunny!.noul).toBeGreaterThanOrEqual(0);
    expect(body.answers.sunny!.noul).toBeLessThanOrEqual(1);
    expect(["Paris", "London", "Rome"]).toContain(body.answers.city!.choice);
    for (const id of ["city", "effort"]) {
      const ps = Object.values(body.answers[id]!.probabilities!);
      expect(ps).toHaveLength(3);
      expect(ps.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    }
    expect(body.usage.input_tokens).toBeGreaterThan(30);
    expect(body.usage.output_tokens).toBe(0);
    // The readout's noise canvases are fixed: the same request gets the same answers.
    expect((await decide()).answers).toEqual(body.answers);
  }, 60_000);
});
