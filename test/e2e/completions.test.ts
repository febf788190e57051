// POST /v1/completions end to end: the official `openai` client's `completions.create` over
// real HTTP against the embedded server serving the tiny test model. The prompt is continued
// as it is (no chat template); the tiny model's text is noise, so what is pinned down is the
// shape and the rules (stop, echo, logprobs, streaming, usage, refusals, quota).
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { TextCompletionChunkSchema, TextCompletionSchema } from "../../gateway/schemas/completion-response.js";
import { openaiClientFor, serveTesseraForFile } from "../helpers/openai.js";
import type { TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

serveTesseraForFile((served) => ({ tessera, client } = served));
const clientFor = (apiKey: string) => openaiClientFor(tessera, apiKey);

const MODEL = "textmodel-26b";
const PROMPT = "Once upon a time, in a small town by the sea, there lived";
const ask = { model: MODEL, prompt: PROMPT, max_tokens: 40 };

async function streamAll(params: OpenAI.CompletionCreateParamsStreaming, c = client) {
  const chunks = [];
  for await (const chunk of await c.completions.create(params)) chunks.push(TextCompletionChunkSchema.parse(chunk));
  return chunks;
}

const textOf = (chunks: { choices: { text: string }[] }[]) => chunks.map((c) => c.choices[0]?.text ?? "").join("");

describe("completions.create", () => {
  it("continues the raw prompt: text_completion with usage; the prompt is not wrapped in the chat template", async () => {
    const { data, response } = await client.completions.create(ask).withResponse();
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toBe(response.headers.get("x-service-request-id"));
    const completion = TextCompletionSchema.parse(data);
    expect(completion).toMatchObject({ object: "text_completion", model: MODEL });
    const [choice] = completion.choices;
    expect(choice).toMatchObject({ index: 0, logprobs: null });
    expect(choice!.text.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(choice!.finish_reason);
    expect(completion.usage.total_tokens).toBe(completion.usage.prompt_tokens + completion.usage.completion_tokens);
    if (choice!.finish_reason === "length") expect(completion.usage.completion_tokens).toBe(40);

    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 1 });
    expect(completion.usage.prompt_tokens).toBeLessThan(chat.usage!.prompt_tokens);

    // max_tokens defaults to 16, as OpenAI's does.
    const short = await client.completions.create({ model: MODEL, prompt: "The sea is" });
    expect(short.usage!.completion_tokens).toBeLessThanOrEqual(16);
  });

  it("stop ends the text before the stop sequence", async () => {
    const full = await client.completions.create(ask);
    const text = full.choices[0]!.text;
    expect(text.length).toBeGreaterThan(8);
    const stop = text.slice(5, 8);
    const cut = await client.completions.create({ ...ask, stop: [stop, "never-in-this-text"] });
    expect(cut.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(cut.choices[0]!.finish_reason).toBe("stop");
  });

  it("echo puts the prompt before the same continuation", async () => {
    const plain = await client.completions.create(ask);
    const echoed = await client.completions.create({ ...ask, echo: true });
    expect(echoed.choices[0]!.text).toBe(PROMPT + plain.choices[0]!.text);
    expect(echoed.usage).toEqual(plain.usage);
  });

  it("logprobs: 2 gives one entry per completion token with up to 3 alternatives and offsets into the text", async () => {
    const completion = TextCompletionSchema.parse(await client.completions.create({ ...ask, logprobs: 2 }));
    const { text, logprobs } = completion.choices[0]!;
    const lp = logprobs!;
    expect(lp.tokens).toHaveLength(completion.usage.completion_tokens);
    expect(lp.token_logprobs).toHaveLength(lp.tokens.length);
    expect(lp.text_offset[0]).toBe(0);
    const chars = [...text];
    lp.tokens.forEach((token, i) => {
      const top = lp.top_logprobs[i]!;
      expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
      expect(Object.keys(top).length).toBeLessThanOrEqual(3);
      // Greedy unmasking commits the most probable token: it is among its alternatives with its own logprob.
      expect(top[token]).toBe(lp.token_logprobs[i]);
      expect(lp.text_offset[i + 1] ?? chars.length).toBeGreaterThanOrEqual(lp.text_offset[i]!);
      // Each whole token is found in the text where its offset says (the tiny model's noise
      // also has byte tokens that are part of a character, shown as U+FFFD).
      if (!token.includes("\uFFFD")) expect(chars.slice(lp.text_offset[i]).join("").startsWith(token)).toBe(true);
    });
  });

  it("echo with logprobs: the prompt's tokens first, with null logprobs (prompt tokens are not scored)", async () => {
    const completion = TextCompletionSchema.parse(await client.completions.create({ ...ask, echo: true, logprobs: 1 }));
    const lp = completion.choices[0]!.logprobs!;
    const promptTokens = completion.usage.prompt_tokens;
    expect(lp.tokens).toHaveLength(promptTokens + completion.usage.completion_tokens);
    expect(lp.tokens.slice(0, promptTokens).join("")).toBe(PROMPT);
    expect(lp.token_logprobs.slice(0, promptTokens).every((l) => l === null)).toBe(true);
    expect(lp.top_logprobs.slice(0, promptTokens).every((t) => t === null)).toBe(true);
    expect(lp.token_logprobs.slice(promptTokens).every((l) => typeof l === "number")).toBe(true);
    expect(lp.text_offset[0]).toBe(0);
    expect(lp.text_offset[promptTokens]).toBe([...PROMPT].length);
  });

  it("streamed: text chunks spelling the same text, the last with finish_reason and usage, then [DONE]", async () => {
    const plain = await client.completions.create({ ...ask, logprobs: 2 });
    const chunks = await streamAll({ ...ask, logprobs: 2, stream: true });
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.every((c) => c.choices.length === 1 && c.object === "text_completion")).toBe(true);
    expect(textOf(chunks)).toBe(plain.choices[0]!.text);
    const last = chunks.at(-1)!;
    expect(last.choices[0]!.finish_reason).toBe(plain.choices[0]!.finish_reason);
    expect(last.usage).toEqual(plain.usage);
    expect(chunks.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null && c.usage === undefined)).toBe(true);
    const streamed = chunks.flatMap((c) => c.choices[0]!.logprobs?.tokens ?? []);
    expect(streamed).toEqual(plain.choices[0]!.logprobs!.tokens);
    expect(chunks.flatMap((c) => c.choices[0]!.logprobs?.text_offset ?? [])).toEqual(plain.choices[0]!.logprobs!.text_offset);
  });

  it("streamed with include_usage and echo: the prompt first, then OpenAI's extra usage chunk without choices", async () => {
    const chunks = await streamAll({ ...ask, echo: true, stream: true, stream_options: { include_usage: true } });
    expect(chunks[0]!.choices[0]!.text).toBe(PROMPT);
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).not.toBeNull();
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
  });
});

describe("completions: refusals the SDK reads", () => {
  const refused = async (params: Record<string, unknown>) => {
    const err = await client.completions
      .create({ ...ask, ...params } as OpenAI.CompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    return err as InstanceType<typeof OpenAI.APIError>;
  };

  it("suffix, n > 1, best_of > 1, several prompts, token ids, logprobs above 5: 400 naming the field", async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ suffix: " and they lived happily." }, "suffix", /suffix/],
      [{ n: 2 }, "n", /only one choice/],
      [{ best_of: 2 }, "best_of", /only one candidate/],
      [{ prompt: ["one", "two"] }, "prompt", /only one prompt/],
      [{ prompt: [464, 3290] }, "prompt", /token-id prompts are not supported/],
      [{ logprobs: 6 }, "logprobs", /from 0 to 5/],
    ];
    for (const [params, param, message] of cases) {
      const err = await refused(params);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.status).toBe(400);
      expect(err.param).toBe(param);
      expect(err.type).toBe("invalid_request_error");
      expect(err.message).toMatch(message);
    }
    const streamed = await client.completions.create({ ...ask, n: 3, stream: true }).catch((e: unknown) => e);
    expect((streamed as InstanceType<typeof OpenAI.APIError>).param).toBe("n");
  });

  it("an unknown key is a 401 the SDK reads, with the request id", async () => {
    const err = await clientFor("tsr_unknown")
      .completions.create(ask)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    const auth = err as InstanceType<typeof OpenAI.AuthenticationError>;
    expect(auth.type).toBe("authentication_error");
    expect(auth.message).not.toContain("no body");
    expect(auth.requestID).toMatch(/^req_/);
  });

  it("an unknown model is 404 model_not_found; a prompt past the context is 400", async () => {
    const unknown = await refused({ model: "no-such-model" });
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown.code).toBe("model_not_found");
    for (const prompt of ["lorem ipsum dolor ".repeat(800), "x".repeat(500_000)]) {
      const tooLong = await refused({ prompt });
      expect(tooLong.status).toBe(400);
      expect(tooLong.message).toMatch(/prompt too long/);
    }
  });
});

describe("completions: quota", () => {
  it("charges the text quota exactly the usage it reports, streamed or not", async () => {
    const key = await tessera.createKey();
    const own = clientFor(key.apiKey);
    const plain = await own.completions.create(ask);
    const chunks = await streamAll({ ...ask, echo: true, stream: true }, own);
    const usages = [plain.usage!, chunks.at(-1)!.usage!];
    // A stream is settled once it has ended, just after the client read [DONE].
    let ledger = await tessera.clients.accounting.getUsage({ keyId: key.keyId });
    for (let tries = 0; ledger.days.reduce((n, d) => n + Number(d.requests), 0) < 2 && tries < 100; tries++) {
      await new Promise((r) => setTimeout(r, 20));
      ledger = await tessera.clients.accounting.getUsage({ keyId: key.keyId });
    }
    const sum = (f: (d: (typeof ledger.days)[number]) => bigint) => ledger.days.reduce((n, d) => n + Number(f(d)), 0);
    expect(sum((d) => d.promptTokens)).toBe(usages.reduce((n, u) => n + u.prompt_tokens, 0));
    expect(sum((d) => d.completionTokens)).toBe(usages.reduce((n, u) => n + u.completion_tokens, 0));
    expect(sum((d) => d.requests)).toBe(2);
  });

  it("a quota that cannot hold prompt + max_tokens is 429 insufficient_quota", async () => {
    const key = await tessera.createKey({ textQuota: 20 });
    const err = await clientFor(key.apiKey)
      .completions.create(ask)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).type).toBe("insufficient_quota");
  });
});
