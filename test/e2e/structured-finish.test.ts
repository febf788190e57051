// Structured replies that FINISH (docs/constrained-decoding.md, "Finishing a value"), end to end
// on the tiny test model through the client libraries, with the default max_tokens and schemas
// as users write them: no maxLength, no maxItems. The tiny model's weights are random and it
// rarely picks a closing quote, so without the loop guard and the length budgets its strings
// run to max_tokens (finish_reason "length", which parse(), generateObject and
// withStructuredOutput refuse); with them, every reply must end with stop / tool_calls and
// validate.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject } from "ai";
import { Ajv } from "ajv";
import type OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { serveTesseraForFile } from "../helpers/openai.js";
import type { TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;
serveTesseraForFile((served) => ({ tessera, client } = served));

const MODEL = "textmodel-26b";
const ajv = new Ajv({ strict: false });
const Person = z.object({ name: z.string(), age: z.number().int(), hobbies: z.array(z.string()), email: z.string().nullable() });

describe("replies finish with the default max_tokens", () => {
  it("openai parse() + zod: an unbounded object finishes and parses", async () => {
    const completion = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "Give me a person with name and age." }],
      response_format: zodResponseFormat(Person, "person"),
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("stop");
    expect(Person.safeParse(choice.message.parsed).success).toBe(true);
    expect(Number.isSafeInteger(choice.message.parsed!.age)).toBe(true);
  });

  it("json_object finishes", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Describe yourself as JSON." }],
      response_format: { type: "json_object" },
    });
    expect(completion.choices[0]!.finish_reason).toBe("stop");
    expect(typeof JSON.parse(completion.choices[0]!.message.content!)).toBe("object");
  });

  it("streamed tool calls (required) finish with valid arguments", async () => {
    const parameters = { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"] };
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Forecast for Madrid?" }],
      tools: [{ type: "function", function: { name: "forecast", parameters } }],
      tool_choice: "required",
      stream: true,
    });
    let finish: string | null | undefined;
    const args = new Map<number, string>();
    for await (const chunk of stream) {
      finish = chunk.choices[0]?.finish_reason ?? finish;
      for (const call of chunk.choices[0]?.delta.tool_calls ?? [])
        args.set(call.index, (args.get(call.index) ?? "") + (call.function?.arguments ?? ""));
    }
    expect(finish).toBe("tool_calls");
    expect(args.size).toBe(1);
    expect(ajv.validate(parameters, JSON.parse(args.get(0)!))).toBe(true);
  });

  it("AI SDK generateObject (createOpenAICompatible) finishes", async () => {
    const provider = createOpenAICompatible({
      name: "tessera",
      baseURL: `${tessera.url}/v1`,
      apiKey: tessera.key,
      supportsStructuredOutputs: true,
    });
    const { object, finishReason } = await generateObject({
      model: provider(MODEL),
      schema: Person,
      prompt: "Invent a person.",
      maxRetries: 0,
    });
    expect(finishReason).toBe("stop");
    expect(Person.safeParse(object).success).toBe(true);
  });

  for (const method of ["jsonSchema", "functionCalling", "jsonMode"] as const) {
    it(`LangChain withStructuredOutput, method ${method}, finishes`, async () => {
      const chat = new ChatOpenAI({ model: MODEL, apiKey: tessera.key, configuration: { baseURL: `${tessera.url}/v1` }, maxRetries: 0 });
      const structured = chat.withStructuredOutput(Person, { method, name: "person", includeRaw: true });
      const { raw, parsed } = await structured.invoke("Invent a person, as JSON.");
      const finish = (raw.response_metadata as { finish_reason?: string }).finish_reason;
      expect(finish === "stop" || finish === "tool_calls").toBe(true);
      if (method !== "jsonMode") expect(Person.safeParse(parsed).success).toBe(true);
      else expect(typeof parsed).toBe("object");
    });
  }
});
