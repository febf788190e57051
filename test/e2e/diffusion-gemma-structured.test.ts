// Structured output on DiffusionGemma (a canvas model) end to end: the official `openai` client
// over real HTTP against the tiny converted DiffusionGemma, whose weights are random, so the
// grammar on the canvas's frontier and the reply budgets do all the work
// (docs/constrained-decoding.md, "On a canvas"). Every reply must finish (`stop` / `tool_calls`,
// never `length`) and validate: JSON schemas through parse(), json_object, named / required /
// auto tools, streamed, and the Responses API.
import { Ajv } from "ajv";
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { HAVE_CONVERT_VENV } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

const MODEL = "textmodel-26b";
const ajv = new Ajv({ strict: false });
const user = (content: string) => [{ role: "user" as const, content }];

// Unbounded strings and lists on purpose: the budgets, not the schema, must end them, within the
// default max_tokens (the tiny model's 384-token vocabulary spells a key in several tokens, more
// than the reply budget's reserve assumes, so a small max_tokens can leave too little for the keys).
const Person = z.object({
  name: z.string(),
  age: z.number().int(),
  role: z.enum(["admin", "user", "guest"]),
  active: z.boolean(),
  tags: z.array(z.string()),
  address: z.object({ city: z.string(), zip: z.string().nullable() }),
});

const weather = {
  type: "object",
  properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] }, days: { type: "integer" } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const lookup = {
  type: "object",
  properties: { word: { type: "string" }, limit: { type: "integer", minimum: 1, maximum: 10 } },
  required: ["word"],
};
const tools: OpenAI.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: weather } },
  { type: "function", function: { name: "lookup_word", description: "Dictionary entry", parameters: lookup } },
];
const schemaOf: Record<string, object> = { get_weather: weather, lookup_word: lookup };

function expectValidCall(call: OpenAI.ChatCompletionMessageToolCall): void {
  expect(call.type).toBe("function");
  if (call.type !== "function") return;
  const args = JSON.parse(call.function.arguments) as unknown;
  const validate = ajv.compile(schemaOf[call.function.name]!);
  expect(validate(args), `${call.function.name}(${call.function.arguments}): ${ajv.errorsText(validate.errors)}`).toBe(true);
}

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma structured output through the openai client (grammar on the canvas)", () => {
  let tessera: TestTessera;
  let client: OpenAI;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    tessera = await startTestTessera({ modelDir: fx.model });
    client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 120_000 });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  it("json_schema through parse() + zod: every reply finishes with stop and validates", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await client.chat.completions.parse({
        model: MODEL,
        messages: user("Describe a user of the system."),
        response_format: zodResponseFormat(Person, "person"),
      });
      const choice = r.choices[0]!;
      expect(choice.finish_reason).toBe("stop");
      expect(Person.parse(choice.message.parsed)).toEqual(choice.message.parsed);
    }
  }, 300_000);

  it("json_schema streamed: the committed text arrives step by step, and the stream's final message parses", async () => {
    const stream = client.chat.completions.stream({
      model: MODEL,
      messages: user("Describe a user of the system."),
      response_format: zodResponseFormat(Person, "person"),
    });
    let deltas = 0;
    for await (const chunk of stream) if ((chunk.choices[0]?.delta.content ?? "") !== "") deltas++;
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe("stop");
    expect(Person.parse(final.choices[0]!.message.parsed)).toEqual(final.choices[0]!.message.parsed);
    // More deltas than the reply has canvases of 16 tokens: pieces stream before their canvas ends.
    expect(deltas).toBeGreaterThan(Math.ceil(final.usage!.completion_tokens / 16));
  }, 300_000);

  it("with thinking on, a constrained reply starts at the grammar: the named call is the whole reply", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: user("What is the weather in Paris?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 120,
      // @ts-expect-error chat_template_kwargs is the gateway's extension (vLLM's name)
      chat_template_kwargs: { enable_thinking: true },
    });
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    expectValidCall(r.choices[0]!.message.tool_calls![0]!);
  }, 120_000);

  it("json_object: a JSON object that finishes, streamed too", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: user("Reply in JSON."),
      response_format: { type: "json_object" },
      max_tokens: 120,
    });
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const value = JSON.parse(r.choices[0]!.message.content!) as unknown;
    expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: user("Reply in JSON."),
      response_format: { type: "json_object" },
      max_tokens: 120,
      stream: true,
    });
    let content = "";
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? "";
      finish ??= chunk.choices[0]?.finish_reason;
    }
    expect(finish).toBe("stop");
    expect(typeof JSON.parse(content)).toBe("object");
  }, 300_000);

  it("named and required tool_choice: one call, valid arguments, finish_reason tool_calls; streamed as tool_calls deltas", async () => {
    const named = await client.chat.completions.create({
      model: MODEL,
      messages: user("What is the weather in Paris?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 120,
    });
    expect(named.choices[0]!.finish_reason).toBe("tool_calls");
    expect(named.choices[0]!.message.content ?? "").toBe("");
    const [call] = named.choices[0]!.message.tool_calls!;
    expect(call!.type === "function" && call!.function.name).toBe("get_weather");
    expectValidCall(call!);

    const required = await client.chat.completions.create({
      model: MODEL,
      messages: user("Look something up."),
      tools,
      tool_choice: "required",
      max_tokens: 120,
    });
    expect(required.choices[0]!.finish_reason).toBe("tool_calls");
    expect(required.choices[0]!.message.tool_calls).toHaveLength(1);
    expectValidCall(required.choices[0]!.message.tool_calls![0]!);

    const stream = client.chat.completions.stream({
      model: MODEL,
      messages: user("What is the weather in Oslo?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 120,
    });
    let deltas = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.tool_calls !== undefined) deltas++;
    const final = await stream.finalChatCompletion();
    expect(deltas).toBeGreaterThan(0);
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expectValidCall(final.choices[0]!.message.tool_calls![0]!);
  }, 300_000);

  it("tool_choice auto: any call the model opens is a valid tool_calls entry, never markup in content; none ends with length", async () => {
    for (let i = 0; i < 4; i++) {
      const r = await client.chat.completions.create({ model: MODEL, messages: user("Hello, what can you do?"), tools, max_tokens: 96 });
      const choice = r.choices[0]!;
      expect(choice.message.content ?? "").not.toContain("<|tool_call>");
      expect(choice.message.content ?? "").not.toContain("call:");
      for (const call of choice.message.tool_calls ?? []) expectValidCall(call);
      if ((choice.message.tool_calls ?? []).length > 0) expect(choice.finish_reason).toBe("tool_calls");
    }
  }, 300_000);

  it("the Responses API: a zod text format parsed, and a required function call with valid arguments", async () => {
    const r = await client.responses.parse({
      model: MODEL,
      input: "Describe a user of the system.",
      text: { format: zodTextFormat(Person, "person") },
    });
    expect(r.status).toBe("completed");
    expect(Person.parse(r.output_parsed)).toEqual(r.output_parsed);
    const call = await client.responses.create({
      model: MODEL,
      input: "Weather in Rome?",
      tools: [{ type: "function", name: "get_weather", parameters: weather, strict: false }],
      tool_choice: "required",
      max_output_tokens: 120,
    });
    const fn = call.output.find((o) => o.type === "function_call");
    expect(fn?.type === "function_call" && fn.name).toBe("get_weather");
    if (fn?.type === "function_call") expect(ajv.compile(weather)(JSON.parse(fn.arguments))).toBe(true);
  }, 300_000);

  it("a schema the grammar cannot enforce is a 400 naming the keyword, as on a mask model", async () => {
    const err = await client.chat.completions
      .create({
        model: MODEL,
        messages: user("hi"),
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", not: { required: ["a"] } } } },
        max_tokens: 16,
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toMatch(/"not" cannot be enforced/);
  }, 60_000);
});
