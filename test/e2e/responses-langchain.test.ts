// POST /v1/responses through LangChain's ChatOpenAI with `useResponsesApi: true` (the
// @langchain/openai 1.5 client that issue 12 names), against the tiny test model: plain and
// streamed replies, usage as charged, a forced tool call and its ToolMessage round trip, and
// thinking (a reasoning block) sent back in the next turn.
import { ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { describe, expect, it } from "vitest";
import { serveTesseraForFile } from "../helpers/openai.js";
import type { TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

serveTesseraForFile((served) => ({ tessera } = served));

const MODEL = "textmodel-26b";

function chat(apiKey: string, extra: Partial<ConstructorParameters<typeof ChatOpenAI>[0]> = {}): ChatOpenAI {
  return new ChatOpenAI({
    model: MODEL,
    apiKey,
    configuration: { baseURL: `${tessera.url}/v1` },
    useResponsesApi: true,
    maxRetries: 0,
    ...extra,
  });
}

/** The text blocks of a reply, joined. */
const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : (content as { type: string; text?: string }[])
        .filter((b) => b.type === "text")
        .map((b) => b.text)
        .join("");

const tools = [
  {
    type: "function" as const,
    function: {
      name: "get_weather",
      description: "Current weather of a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] },
    },
  },
];

describe("responses through LangChain's ChatOpenAI (useResponsesApi)", () => {
  it("invoke and stream: the same text, usage_metadata as charged", async () => {
    const key = await tessera.createKey();
    const llm = chat(key.apiKey, { maxTokens: 24 });
    const reply = await llm.invoke([
      ["system", "Be brief."],
      ["human", "What is the weather like in Paris today?"],
    ]);
    expect(reply.response_metadata["id"]).toMatch(/^resp_/);
    const usage = reply.usage_metadata!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    const used = await tessera.clients.accounting.getUsage({ keyId: key.keyId });
    expect(used.days.reduce((n, d) => n + Number(d.promptTokens + d.completionTokens), 0)).toBe(usage.total_tokens);

    let streamed = "";
    for await (const chunk of await llm.stream([
      ["system", "Be brief."],
      ["human", "What is the weather like in Paris today?"],
    ])) {
      streamed += textOf(chunk.content);
    }
    expect(streamed).toBe(textOf(reply.content));
  });

  it("a forced tool call, then its ToolMessage: the round trip is answered", async () => {
    const llm = chat(tessera.key, { maxTokens: 256 });
    const called = await llm.bindTools(tools, { tool_choice: "get_weather" }).invoke("Weather in Paris?");
    expect(called.tool_calls).toHaveLength(1);
    const call = called.tool_calls![0]!;
    expect(call.name).toBe("get_weather");
    expect(typeof (call.args as { city: unknown }).city).toBe("string");

    const answer = await llm
      .bindTools(tools)
      .invoke([["human", "Weather in Paris?"], called, new ToolMessage({ content: "21 °C, clear", tool_call_id: call.id! })]);
    expect(answer.response_metadata["id"]).toMatch(/^resp_/);
    expect(answer.usage_metadata!.input_tokens).toBeGreaterThan(called.usage_metadata!.input_tokens);
  });

  it("reasoning (through modelKwargs): a reasoning block, sent back as a reasoning item in the next turn", async () => {
    const llm = chat(tessera.key, { maxTokens: 64, modelKwargs: { reasoning: { effort: "low" } } });
    const first = await llm.invoke("Is a tomato a fruit?");
    const reasoning = (first.content as { type: string; reasoning?: string }[]).find((b) => b.type === "reasoning");
    expect(reasoning?.reasoning?.length ?? 0).toBeGreaterThan(0);
    expect(first.usage_metadata!.output_token_details?.reasoning).toBeGreaterThan(0);
    const second = await llm.invoke([["human", "Is a tomato a fruit?"], first, ["human", "And a cucumber?"]]);
    expect(second.usage_metadata!.input_tokens).toBeGreaterThan(first.usage_metadata!.input_tokens);
  });
});
