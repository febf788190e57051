// POST /v1/responses on the bundled model (models/tessera-bd-small), through the clients that
// call it by default: the Vercel AI SDK's OpenAI provider (`provider(id)` is its Responses
// model) and the openai client's structured outputs. The model is small and its answers
// silly; what is constrained (a JSON schema, a forced tool call) must still parse and
// validate, and the usage the clients report must be what the key was charged.
import { existsSync } from "node:fs";
import { createOpenAI } from "@ai-sdk/openai";
import { Ajv } from "ajv";
import {
  APICallError,
  defaultSettingsMiddleware,
  generateText,
  jsonSchema,
  type ModelMessage,
  Output,
  stepCountIs,
  streamText,
  tool,
  wrapLanguageModel,
} from "ai";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { BUNDLED_MODEL_DIR, startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
const MODEL = "textmodel-26b";
const ajv = new Ajv({ strict: false });

/** Text tokens the ledger has charged a key. */
async function charged(keyId: string): Promise<{ prompt: number; completion: number }> {
  const usage = await tessera.clients.accounting.getUsage({ keyId });
  return {
    prompt: usage.days.reduce((n, d) => n + Number(d.promptTokens), 0),
    completion: usage.days.reduce((n, d) => n + Number(d.completionTokens), 0),
  };
}

async function providerWithKey() {
  const key = await tessera.createKey();
  return { key, provider: createOpenAI({ baseURL: `${tessera.url}/v1`, apiKey: key.apiKey }) };
}

const cityParameters = {
  type: "object" as const,
  properties: { city: { type: "string" as const, maxLength: 16 } },
  required: ["city"],
  additionalProperties: false,
};

describe.skipIf(!existsSync(BUNDLED_MODEL_DIR))("responses on the bundled model", () => {
  beforeAll(async () => {
    tessera = await startTestTessera({ models: "bundled", env: { TESSERA_INTRA_OP_THREADS: "2" } });
  }, 120_000);

  afterAll(async () => {
    await tessera?.close();
  });

  it("openai: text.format json_schema, through responses.parse: the output parses and validates", async () => {
    const client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 120_000 });
    const Word = z.object({
      word: z.string().max(16),
      part_of_speech: z.enum(["noun", "verb", "adjective", "adverb"]),
      is_common: z.boolean(),
    });
    const response = await client.responses.parse({
      model: MODEL,
      instructions: "You describe words.",
      input: "What does the word harbor mean?",
      text: { format: zodTextFormat(Word, "word") },
    });
    expect(response.status).toBe("completed");
    expect(Word.safeParse(response.output_parsed).success).toBe(true);
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "word" });
  });

  it("AI SDK generateText: text, finish reason and usage as charged", async () => {
    const { key, provider } = await providerWithKey();
    const result = await generateText({ model: provider(MODEL), system: "Be brief.", prompt: "Name a fruit.", maxOutputTokens: 48 });
    expect(typeof result.text).toBe("string");
    expect(["stop", "length"]).toContain(result.finishReason);
    expect(result.response.id).toMatch(/^resp_/);
    expect(result.response.modelId).toBe(MODEL);
    const { inputTokens, outputTokens, totalTokens } = result.usage;
    expect(inputTokens).toBeGreaterThan(0);
    expect(outputTokens).toBeGreaterThan(0);
    expect(totalTokens).toBe(inputTokens! + outputTokens!);
    expect(await charged(key.keyId)).toEqual({ prompt: inputTokens, completion: outputTokens });
  });

  it("AI SDK streamText: the text arrives in deltas; usage as charged", async () => {
    const { key, provider } = await providerWithKey();
    const result = streamText({ model: provider(MODEL), prompt: "Tell me about the sea.", maxOutputTokens: 48 });
    const deltas: string[] = [];
    for await (const delta of result.textStream) deltas.push(delta);
    const text = await result.text;
    expect(deltas.join("")).toBe(text);
    expect(text.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(await result.finishReason);
    const usage = await result.usage;
    expect(usage.totalTokens).toBe(usage.inputTokens! + usage.outputTokens!);
    await vi.waitFor(async () => expect(await charged(key.keyId)).toEqual({ prompt: usage.inputTokens, completion: usage.outputTokens }));
  });

  it("AI SDK generateText with Output.object: text.format json_schema, the object validates", async () => {
    const { provider } = await providerWithKey();
    const City = z.object({ name: z.string().max(24), country: z.string().max(24), population: z.number().int() });
    const result = await generateText({ model: provider(MODEL), prompt: "Describe a city.", output: Output.object({ schema: City }) });
    expect(City.safeParse(result.output).success).toBe(true);
    expect((result.request.body as { text: { format: { type: string } } }).text.format.type).toBe("json_schema");
  });

  it("AI SDK with reasoning: the thinking arrives as reasoning, apart from the text, streamed and not", async () => {
    const { provider } = await providerWithKey();
    const providerOptions = { openai: { forceReasoning: true, reasoningEffort: "low", store: false } };
    const ask = { model: provider(MODEL), prompt: "Is a tomato a fruit?", maxOutputTokens: 96, providerOptions };
    const result = await generateText(ask);
    expect(result.reasoningText?.length ?? 0).toBeGreaterThan(0);
    expect(result.text).not.toContain(result.reasoningText!);
    expect(result.usage.outputTokenDetails.reasoningTokens).toBeGreaterThan(0);
    const streamed = streamText(ask);
    let reasoning = "";
    for await (const part of streamed.fullStream) if (part.type === "reasoning-delta") reasoning += part.text;
    expect(reasoning).toBe(result.reasoningText);
    expect(await streamed.text).toBe(result.text);
  });

  it("AI SDK multi-turn: earlier replies go back as items with store false; by reference (its default) a 400 that says so", async () => {
    const { provider } = await providerWithKey();
    const first: ModelMessage[] = [{ role: "user", content: "Name a fruit." }];
    const turn1 = await generateText({ model: provider(MODEL), messages: first, maxOutputTokens: 16 });
    const history: ModelMessage[] = [...first, ...turn1.response.messages, { role: "user", content: "And a vegetable?" }];

    // The AI SDK refers to its earlier text by item id unless told nothing is stored.
    const refused = await generateText({ model: provider(MODEL), messages: history, maxOutputTokens: 16, maxRetries: 0 }).catch(
      (e: unknown) => e,
    );
    expect(APICallError.isInstance(refused)).toBe(true);
    expect((refused as APICallError).statusCode).toBe(400);
    expect((refused as APICallError).message).toMatch(/item_reference.*store = false/);

    // Once for every call: a model whose provider options say store false.
    const model = wrapLanguageModel({
      model: provider(MODEL),
      middleware: defaultSettingsMiddleware({ settings: { providerOptions: { openai: { store: false } } } }),
    });
    const turn2 = await generateText({ model, messages: history, maxOutputTokens: 16 });
    const sent = turn2.request.body as { input: { role?: string; content?: unknown }[] };
    expect(sent.input.map((item) => item.role)).toEqual(["user", "assistant", "user"]);
    expect(sent.input[1]!.content).toEqual([{ type: "output_text", text: turn1.text }]);
    expect(turn2.usage.inputTokens).toBeGreaterThan(turn1.usage.inputTokens!);
  });

  it("AI SDK generateText with a tool: the named call validates, runs, and its result goes back in the next step", async () => {
    const { provider } = await providerWithKey();
    const seen: unknown[] = [];
    const getWeather = tool({
      description: "Current weather of a city",
      inputSchema: jsonSchema<{ city: string }>(cityParameters),
      execute: async ({ city }) => {
        seen.push(city);
        return { city, celsius: 21, sky: "clear" };
      },
    });
    const result = await generateText({
      model: provider(MODEL),
      prompt: "What is the weather in Paris?",
      tools: { get_weather: getWeather },
      toolChoice: { type: "tool", toolName: "get_weather" },
      // Nothing is stored on the server: the AI SDK sends the items themselves, not references.
      providerOptions: { openai: { store: false } },
      stopWhen: stepCountIs(2),
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? {} : { toolChoice: "none" }),
      maxOutputTokens: 64,
    });
    const [first, second] = result.steps;
    expect(first!.toolCalls).toHaveLength(1);
    const call = first!.toolCalls[0]!;
    expect(call.toolName).toBe("get_weather");
    expect(ajv.validate(cityParameters, call.input)).toBe(true);
    expect(seen).toEqual([(call.input as { city: string }).city]);
    expect(first!.toolResults[0]!.output).toMatchObject({ celsius: 21 });
    // The second step sent the call and its result back as items, and got a text answer.
    const sent = second!.request.body as { input: { type?: string; call_id?: string }[] };
    expect(sent.input.filter((item) => item.type?.startsWith("function_call"))).toMatchObject([
      { type: "function_call", call_id: call.toolCallId },
      { type: "function_call_output", call_id: call.toolCallId },
    ]);
    expect(second!.toolCalls).toHaveLength(0);
    expect(["stop", "length"]).toContain(second!.finishReason);
    expect(second!.usage.inputTokens).toBeGreaterThan(0);
  });

  it("AI SDK streamText with toolChoice required: the call streams in and validates", async () => {
    const { provider } = await providerWithKey();
    const result = streamText({
      model: provider(MODEL),
      prompt: "What is the weather in Lyon?",
      tools: { get_weather: tool({ description: "Current weather of a city", inputSchema: jsonSchema<{ city: string }>(cityParameters) }) },
      toolChoice: "required",
    });
    const calls = await result.toolCalls;
    expect(calls).toHaveLength(1);
    expect(ajv.validate(cityParameters, calls[0]!.input)).toBe(true);
    expect(await result.finishReason).toBe("tool-calls");
  });
});
