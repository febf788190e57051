// logprobs / top_logprobs end to end: the official `openai` client over real HTTP against the
// embedded server serving the tiny test model. Each reply token's log-probability is read from
// the forward that committed it, with the top alternatives of that position and step.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatCompletionChunkSchema, ChatCompletionSchema } from "../../gateway/schemas/chat-response.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny" });
  client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

const ask = { model: "textmodel-26b", messages: [{ role: "user" as const, content: "Say something about the sea." }], max_tokens: 90 };

const utf8 = (bytes: number[]) => Buffer.from(bytes).toString("utf8");

describe("logprobs", () => {
  it("one entry per completion token, spelling the content, with the top alternatives of its step", async () => {
    const { data, response } = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 5 }).withResponse();
    expect(response.headers.get("x-request-id")).toBe(response.headers.get("x-service-request-id"));
    const completion = ChatCompletionSchema.parse(data);
    const choice = completion.choices[0]!;
    const entries = choice.logprobs!.content!;
    expect(entries).toHaveLength(completion.usage.completion_tokens);
    expect(utf8(entries.flatMap((e) => e.bytes))).toBe(choice.message.content);
    for (const entry of entries) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(5);
      const tops = entry.top_logprobs.map((t) => t.logprob);
      expect([...tops].sort((a, b) => b - a)).toEqual(tops);
      // Greedy unmasking commits the most probable token: it heads its own alternatives.
      expect(entry.top_logprobs[0]).toEqual({ token: entry.token, logprob: entry.logprob, bytes: entry.bytes });
      expect(
        Buffer.from(entry.bytes)
          .toString("utf8")
          .replace(/\uFFFD/g, ""),
      ).toBe(entry.token.replace(/\uFFFD/g, ""));
    }
    expect(entries.reduce((sum, e) => sum + Math.exp(e.logprob), 0)).toBeGreaterThan(0);
  });

  it("streamed: the same entries, per chunk", async () => {
    const plain = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 2 });
    const stream = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 2, stream: true });
    const streamed: unknown[] = [];
    let chunksWithEntries = 0;
    for await (const chunk of stream) {
      const parsed = ChatCompletionChunkSchema.parse(chunk);
      const entries = parsed.choices[0]?.logprobs?.content ?? [];
      if (entries.length > 0) chunksWithEntries++;
      streamed.push(...entries);
    }
    expect(chunksWithEntries).toBeGreaterThan(1);
    expect(streamed).toEqual(plain.choices[0]!.logprobs!.content);
  });

  it("logprobs without top_logprobs: no alternatives; not asked: null", async () => {
    const bare = await client.chat.completions.create({ ...ask, logprobs: true });
    expect(bare.choices[0]!.logprobs!.content!.every((e) => e.top_logprobs.length === 0)).toBe(true);
    const none = await client.chat.completions.create(ask);
    expect(none.choices[0]!.logprobs).toBeNull();
    expect(none.choices[0]!.message.content).toBe(bare.choices[0]!.message.content);
  });

  it("top_logprobs above 20, or without logprobs, is a readable 400", async () => {
    for (const bad of [{ logprobs: true, top_logprobs: 21 }, { top_logprobs: 3 }]) {
      const err = await client.chat.completions.create({ ...ask, ...bad }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("top_logprobs");
      expect((err as Error).message).toMatch(/top_logprobs/);
    }
  });
});
