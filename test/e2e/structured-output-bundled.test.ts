// Structured output on the bundled model (models/tessera-bd-small), a few requests through the
// official openai client: a parsed zod object, a named tool call, auto tools streamed. The
// model is small and its answers silly; they must still parse and validate. And the requests of
// issue 21 that ran to max_tokens on this model (a person's age written as 1,024 digits, a bare
// integer past 2^53) must finish, and an auto call cut by max_tokens must come back as a call.
import { existsSync } from "node:fs";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { BUNDLED_MODEL_DIR, startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;
const MODEL = "textmodel-26b";
const ajv = new Ajv({ strict: false });

describe.skipIf(!existsSync(BUNDLED_MODEL_DIR))("structured output on the bundled model", () => {
  beforeAll(async () => {
    tessera = await startTestTessera({ models: "bundled", env: { TESSERA_INTRA_OP_THREADS: "2" } });
    client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 120_000 });
  }, 120_000);

  afterAll(async () => {
    await tessera?.close();
  });

  it("parse() with a zod schema", async () => {
    const Word = z.object({
      word: z.string().max(16),
      part_of_speech: z.enum(["noun", "verb", "adjective", "adverb"]),
      is_common: z.boolean(),
      letters: z.number().int(),
    });
    const completion = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "What does the word harbor mean?" }],
      response_format: zodResponseFormat(Word, "word"),
    });
    expect(Word.safeParse(completion.choices[0]!.message.parsed).success).toBe(true);
  });

  it("a named tool call's arguments follow the parameters", async () => {
    const parameters = {
      type: "object",
      properties: { word: { type: "string", maxLength: 16 }, sense: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["word", "sense"],
      additionalProperties: false,
    };
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Look up the word garden." }],
      tools: [{ type: "function", function: { name: "lookup_word", parameters } }],
      tool_choice: { type: "function", function: { name: "lookup_word" } },
    });
    const call = completion.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && ajv.validate(parameters, JSON.parse(call.function.arguments))).toBe(true);
  });

  it("auto tools, streamed: content without markup; every call valid", async () => {
    const parameters = {
      type: "object",
      properties: { city: { type: "string", maxLength: 16 } },
      required: ["city"],
      additionalProperties: false,
    };
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters } }],
      stream: true,
    });
    let content = "";
    const args = new Map<number, string>();
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? "";
      for (const call of chunk.choices[0]?.delta.tool_calls ?? [])
        args.set(call.index, (args.get(call.index) ?? "") + (call.function?.arguments ?? ""));
    }
    expect(content).not.toMatch(/<\/?tool_call>/);
    for (const text of args.values()) expect(ajv.validate(parameters, JSON.parse(text))).toBe(true);
  });

  it("the issue's looping requests finish: a person's age, a bare integer, within 2^53", async () => {
    const Person = z.object({ name: z.string(), age: z.number().int() });
    const person = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "Give me a person with name and age." }],
      response_format: zodResponseFormat(Person, "person"),
    });
    expect(person.choices[0]!.finish_reason).toBe("stop");
    expect(Number.isSafeInteger(person.choices[0]!.message.parsed!.age)).toBe(true);
    const integer = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Pick a number." }],
      response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer" } } },
    });
    expect(integer.choices[0]!.finish_reason).toBe("stop");
    expect(Number.isSafeInteger(JSON.parse(integer.choices[0]!.message.content!))).toBe(true);
  });

  it("replies that rambled to max_tokens close every value before a small max_tokens (reply budget)", async () => {
    // Two of bench/structured.ts's cases that reached `length` at 1,024 tokens before the reply
    // budget: a json_object and an array of objects with two strings each, here at 128 tokens.
    const item = {
      type: "object",
      properties: { explanation: { type: "string" }, output: { type: "string" } },
      required: ["explanation", "output"],
    };
    const steps = {
      type: "object",
      properties: { steps: { type: "array", items: item }, final_answer: { type: "string" } },
      required: ["steps", "final_answer"],
    };
    const requests = [
      { content: "Describe yourself as JSON.", response_format: { type: "json_object" as const }, schema: { type: "object" } },
      {
        content: "Solve 8x + 7 = -23 step by step.",
        response_format: { type: "json_schema" as const, json_schema: { name: "steps", schema: steps } },
        schema: steps,
      },
    ];
    for (const { content, response_format, schema } of requests) {
      const reply = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content }],
        response_format,
        max_tokens: 128,
      });
      const choice = reply.choices[0]!;
      expect(choice.finish_reason, choice.message.content ?? "").toBe("stop");
      expect(reply.usage!.completion_tokens).toBeLessThanOrEqual(128);
      expect(ajv.validate(schema, JSON.parse(choice.message.content!))).toBe(true);
    }
  });

  describe("an auto call cut by max_tokens is a call, never markup", () => {
    const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    // A question the bundled model answers with a call (deterministic decoding), cut inside it.
    const question = "Weather in Berlin?";
    const tool = { name: "get_weather", description: "Current weather in a city", parameters };

    it("chat", async () => {
      const completion = await client.chat.completions.create({
        model: MODEL,
        max_tokens: 10,
        messages: [{ role: "user", content: question }],
        tools: [{ type: "function", function: tool }],
        tool_choice: "auto",
      });
      const message = completion.choices[0]!.message;
      expect(completion.choices[0]!.finish_reason).toBe("length");
      expect(message.content).toBeNull();
      expect(message.tool_calls?.[0]).toMatchObject({ type: "function", function: { name: "get_weather" } });
    });

    it("stream", async () => {
      const stream = await client.chat.completions.create({
        model: MODEL,
        max_tokens: 10,
        messages: [{ role: "user", content: question }],
        tools: [{ type: "function", function: tool }],
        tool_choice: "auto",
        stream: true,
      });
      let content = "";
      const names: string[] = [];
      for await (const chunk of stream) {
        content += chunk.choices[0]?.delta.content ?? "";
        for (const call of chunk.choices[0]?.delta.tool_calls ?? []) if (call.function?.name) names.push(call.function.name);
      }
      expect(content).toBe("");
      expect(names).toEqual(["get_weather"]);
    });

    it("Responses API", async () => {
      const response = await client.responses.create({
        model: MODEL,
        max_output_tokens: 10,
        input: question,
        tools: [{ type: "function", ...tool, strict: false }],
        tool_choice: "auto",
      });
      expect(response.output_text).toBe("");
      expect(response.output.filter((item) => item.type === "function_call")).toMatchObject([{ name: "get_weather" }]);
    });
  });
});
