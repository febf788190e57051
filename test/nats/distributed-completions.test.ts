// POST /v1/completions in distributed mode: the gateway in one process, the inference worker in
// another, reached over Connect (NATS for heartbeats and usage). The raw prompt and the
// prompt's tokens for echo travel on the proto (GenerateRequest.raw_prompt,
// GenerateStarted.tokenized_prompt), so the answers equal the embedded server's rules.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TextCompletionChunkSchema, TextCompletionSchema } from "../../gateway/schemas/completion-response.js";
import { type DistributedHarness, startDistributedHarness, TINY_MODEL_ENTRY } from "../helpers/distributed.js";

let cluster: DistributedHarness;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startDistributedHarness("distributed-completions", {
    models: [{ id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "t", ...TINY_MODEL_ENTRY }],
  });
  await cluster.start(["inference"], { TESSERA_WORKER_ID: "w-1" });
  const front = await cluster.start(["gateway", "accounting", "registry", "decision"], { TESSERA_WORKER_ID: "front" });
  client = new OpenAI({ apiKey: cluster.key, baseURL: `${front.url}/v1`, maxRetries: 0, timeout: 60_000 });
  const end = Date.now() + 10_000;
  while ((await client.models.list()).data.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}, 120_000);

afterAll(async () => {
  await cluster?.close();
});

const PROMPT = "Once upon a time, in a small town by the sea, there lived";
const ask = { model: "textmodel-26b", prompt: PROMPT, max_tokens: 24 };

describe("completions across processes", () => {
  it("a raw prompt, not templated; echo with logprobs lists the prompt's tokens from the remote worker", async () => {
    const plain = TextCompletionSchema.parse(await client.completions.create(ask));
    const chat = await client.chat.completions.create({
      model: "textmodel-26b",
      messages: [{ role: "user", content: PROMPT }],
      max_tokens: 1,
    });
    expect(plain.usage.prompt_tokens).toBeLessThan(chat.usage!.prompt_tokens);

    const echoed = TextCompletionSchema.parse(await client.completions.create({ ...ask, echo: true, logprobs: 1 }));
    const { text, logprobs } = echoed.choices[0]!;
    expect(text).toBe(PROMPT + plain.choices[0]!.text);
    const promptTokens = echoed.usage.prompt_tokens;
    expect(logprobs!.tokens.slice(0, promptTokens).join("")).toBe(PROMPT);
    expect(logprobs!.token_logprobs.slice(0, promptTokens).every((l) => l === null)).toBe(true);
    expect(logprobs!.tokens).toHaveLength(promptTokens + echoed.usage.completion_tokens);
  });

  it("streamed: the same text, usage on the last chunk", async () => {
    const plain = await client.completions.create(ask);
    const chunks = [];
    for await (const chunk of await client.completions.create({ ...ask, stream: true }))
      chunks.push(TextCompletionChunkSchema.parse(chunk));
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toBe(plain.choices[0]!.text);
    expect(chunks.at(-1)!.usage).toEqual(plain.usage);
  });
});
