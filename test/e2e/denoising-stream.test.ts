// The live-denoising extension of the chat stream (`stream_options.include_denoising`) over real
// HTTP on the tiny model: asked for, one `denoising` chunk per forward; not asked for, nothing
// extra on the wire and the official `openai` client's stream exactly as before.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const ask = {
  model: "textmodel-26b",
  messages: [{ role: "user" as const, content: "What is the weather like in Paris today?" }],
  max_tokens: 100,
};

/** The `data:` payloads of an SSE body, `[DONE]` included. */
async function wire(body: Record<string, unknown>): Promise<string[]> {
  const res = await tessera.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...ask, stream: true, ...body }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((event) => event.startsWith("data: "))
    .map((event) => event.slice("data: ".length));
}

interface DenoisingChunk {
  choices: unknown[];
  denoising?: {
    block: number;
    step: number;
    block_size: number;
    reply_start: number;
    masked: number;
    committed: { position: number; token_id: number; text: string }[];
  };
}

describe("stream_options.include_denoising", () => {
  it("sends a denoising chunk per forward, with no choices, between the role chunk and the finish", async () => {
    const payloads = await wire({ stream_options: { include_denoising: true } });
    expect(payloads.at(-1)).toBe("[DONE]");
    const chunks = payloads.slice(0, -1).map((p) => JSON.parse(p) as DenoisingChunk & { object: string });
    const steps = chunks.filter((c) => c.denoising !== undefined);
    expect(steps.length).toBeGreaterThan(2);
    for (const c of steps) {
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.choices).toEqual([]);
      expect(c.denoising!.block_size).toBe(64);
      expect(c.denoising!.committed.length).toBeGreaterThan(0);
      for (const t of c.denoising!.committed) expect(t.position).toBeGreaterThanOrEqual(c.denoising!.reply_start);
    }
    expect(steps[0]!.denoising).toMatchObject({ block: 0, step: 1 });
    expect(chunks.indexOf(steps[0]!)).toBeGreaterThan(0);
    const finishAt = chunks.findIndex((c) => (c.choices[0] as { finish_reason?: string } | undefined)?.finish_reason);
    expect(chunks.indexOf(steps.at(-1)!)).toBeLessThan(finishAt);
  });

  it("not asked for (absent or false): no denoising field anywhere on the wire", async () => {
    for (const body of [{}, { stream_options: { include_denoising: false } }, { stream_options: { include_usage: true } }]) {
      const payloads = await wire(body);
      expect(payloads.join("\n")).not.toContain("denoising");
    }
  });

  it("is refused when it is not a boolean (400 naming the param)", async () => {
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...ask, stream: true, stream_options: { include_denoising: "yes" } }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe("stream_options.include_denoising");
  });

  it("the official openai client streams the same reply with and without it, and never sees it unasked", async () => {
    const collect = async (extra: Record<string, unknown>) => {
      const stream = await client.chat.completions.create({ ...ask, stream: true, ...extra } as OpenAI.ChatCompletionCreateParamsStreaming);
      const chunks: (OpenAI.ChatCompletionChunk & { denoising?: unknown })[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      return chunks;
    };
    const plain = await collect({});
    expect(plain.every((c) => c.denoising === undefined)).toBe(true);
    expect(plain.filter((c) => c.choices.length === 0).length).toBe(0); // no include_usage: the usage rides on the finish chunk
    const traced = await collect({ stream_options: { include_denoising: true } });
    expect(traced.some((c) => c.denoising !== undefined)).toBe(true);
    const text = (chunks: OpenAI.ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text(traced)).toBe(text(plain));
    expect(text(plain).length).toBeGreaterThan(0);

    // The SDK's stream helper assembles the same message.
    const final = await client.chat.completions
      .stream({ ...ask, stream_options: { include_denoising: true } } as unknown as OpenAI.ChatCompletionCreateParamsStreaming)
      .finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(text(plain));
  });

  it("a non-streamed request ignores it: the usual chat.completion", async () => {
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...ask, stream_options: { include_denoising: true } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body["object"]).toBe("chat.completion");
    expect(JSON.stringify(body)).not.toContain("denoising");
  });
});
