// Structured output on the bundled model (models/tessera-bd-small), a few requests through the
// official openai client: a parsed zod object, a named tool call, auto tools streamed. The
// model is small and its answers silly; they must still parse and validate.
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
});
