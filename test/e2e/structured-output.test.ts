// Structured output end to end on the tiny test model, through the client libraries people
// build on: the official `openai` client (parse() + zod, named / required / auto tools,
// streamed tool calls), the Vercel AI SDK (generateObject) and LangChain (withStructuredOutput).
// The tiny model's weights are random, so its words are noise; every reply must still parse
// and validate against its schema, because it is decoded under the schema's grammar.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject } from "ai";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
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

const MODEL = "textmodel-26b";
const ajv = new Ajv({ strict: false });
const user = (content: string) => [{ role: "user" as const, content }];

// Bounded strings and arrays: the tiny model's random weights rarely pick a closing quote, and
// an unbounded string would run to max_tokens (finish_reason "length": a valid prefix only).
const Definition = z.object({
  word: z.string().max(24),
  partOfSpeech: z.enum(["noun", "verb", "adjective"]),
  syllables: z.number().int(),
  synonyms: z.array(z.string().max(16)).max(3),
  plural: z.string().max(24).nullable(),
});

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 40 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const tools: OpenAI.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: weather } },
  {
    type: "function",
    function: {
      name: "lookup_word",
      description: "Dictionary entry",
      parameters: {
        type: "object",
        properties: { word: { type: "string", maxLength: 40 }, limit: { type: "integer" } },
        required: ["word"],
      },
    },
  },
];
const paramsOf = (name: string) => {
  const tool = tools.find((t) => t.type === "function" && t.function.name === name);
  return tool?.type === "function" ? tool.function.parameters! : {};
};

function expectValidCall(call: OpenAI.ChatCompletionMessageToolCall) {
  expect(call.type).toBe("function");
  if (call.type !== "function") return;
  const args = JSON.parse(call.function.arguments);
  const validate = ajv.compile(paramsOf(call.function.name));
  expect(validate(args), JSON.stringify(validate.errors)).toBe(true);
}

describe("openai client", () => {
  it("chat.completions.parse() with a zod response format returns a parsed object", async () => {
    for (const question of ["Define the word cat.", "What is a river?"]) {
      const completion = await client.chat.completions.parse({
        model: MODEL,
        messages: user(question),
        response_format: zodResponseFormat(Definition, "definition"),
      });
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).toBe("stop");
      expect(Definition.safeParse(choice.message.parsed).success).toBe(true);
    }
  });

  it("json_object returns one JSON object", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user("Describe Paris."),
      response_format: { type: "json_object" },
    });
    const value = JSON.parse(completion.choices[0]!.message.content!);
    expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
  });

  it("a recursive $ref schema is enforced", async () => {
    const tree = {
      type: "object",
      properties: { name: { type: "string", maxLength: 12 }, children: { type: "array", items: { $ref: "#" }, maxItems: 2 } },
      required: ["name", "children"],
      additionalProperties: false,
    };
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user("A family tree."),
      response_format: { type: "json_schema", json_schema: { name: "tree", schema: tree } },
    });
    expect(ajv.validate(tree, JSON.parse(completion.choices[0]!.message.content!))).toBe(true);
  });

  it("a named tool's arguments follow its parameters", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user("Weather in Paris?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0]!;
    expect(call.type === "function" && call.function.name).toBe("get_weather");
    expectValidCall(call);
  });

  it('tool_choice "required" calls one of the tools with valid arguments', async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user("Look up 'cat'."),
      tools,
      tool_choice: "required",
    });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    for (const call of choice.message.tool_calls!) expectValidCall(call);
  });

  it('tool_choice "auto": no markup in content; every call is complete and valid', async () => {
    for (const question of ["Weather in Paris?", "Hello!", "Look up 'dog' and the weather in Rome."]) {
      const completion = await client.chat.completions.create({ model: MODEL, messages: user(question), tools, tool_choice: "auto" });
      const message = completion.choices[0]!.message;
      expect(message.content ?? "").not.toMatch(/<\/?tool_call>/);
      for (const call of message.tool_calls ?? []) expectValidCall(call);
      if ((message.tool_calls ?? []).length > 0) expect(completion.choices[0]!.finish_reason).toBe("tool_calls");
    }
  });

  it("streamed tool-call argument deltas concatenate to valid JSON", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: user("Weather in Oslo?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      stream: true,
    });
    let args = "";
    let name = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += call.function?.name ?? "";
        args += call.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe("get_weather");
    expect(finish).toBe("tool_calls");
    expect(ajv.validate(weather, JSON.parse(args))).toBe(true);
  });

  it("a streamed JSON-schema reply concatenates to a valid object", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: user("Define the word sun."),
      response_format: zodResponseFormat(Definition, "definition"),
      stream: true,
    });
    let content = "";
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
    expect(Definition.safeParse(JSON.parse(content)).success).toBe(true);
  });

  it("with thinking, the reasoning is free and the answer after it follows the schema", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user("Define the word moon."),
      response_format: zodResponseFormat(Definition, "definition"),
      chat_template_kwargs: { enable_thinking: true },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(Definition.safeParse(JSON.parse(completion.choices[0]!.message.content!)).success).toBe(true);
  });
});

describe("schemas the grammar cannot enforce: 400 naming the problem", () => {
  const cases: [string, unknown, RegExp][] = [
    ["oneOf", { oneOf: [{ type: "integer" }, { type: "number" }] }, /oneOf.*anyOf/],
    ["an unknown type", { type: "object", properties: { a: { type: "date" } } }, /unknown type "date"/],
    ["a reference to nothing", { type: "object", properties: { a: { $ref: "#/$defs/missing" } } }, /points to nothing/],
    ["uniqueItems", { type: "array", items: { type: "string" }, uniqueItems: true }, /uniqueItems/],
    ["a bad pattern", { type: "string", pattern: "((" }, /not a valid regular expression/],
    [
      "a schema too large",
      { type: "object", properties: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`p${i}`, { type: "string" }])) },
      /too large/,
    ],
  ];
  for (const [what, schema, message] of cases) {
    it(what, async () => {
      const res = await tessera.fetch("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL,
          messages: user("hi"),
          response_format: { type: "json_schema", json_schema: { name: "x", schema } },
        }),
      });
      const body = (await res.json()) as { error: { type: string; message: string; param: string | null } };
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toMatch(message);
      expect(body.error.param).toBe("response_format.json_schema.schema");
    });
  }

  it("a tool whose parameters cannot be enforced", async () => {
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: user("hi"),
        tools: [{ type: "function", function: { name: "f", parameters: { type: "object", not: { required: ["a"] } } } }],
      }),
    });
    const body = (await res.json()) as { error: { type: string; message: string; param: string | null } };
    expect(res.status).toBe(400);
    expect(body.error.message).toMatch(/tools\[f\]\.parameters\.not/);
    expect(body.error.param).toBe("tools");
  });
});

describe("metrics", () => {
  it("count constrained requests and replies by finish reason, jump-forward tokens, compile and step time", async () => {
    const text = await (await tessera.fetch("/metrics", { key: null })).text();
    const value = (line: RegExp) =>
      Number(
        text
          .split("\n")
          .find((l) => line.test(l))
          ?.split(" ")
          .at(-1) ?? Number.NaN,
      );
    expect(value(/^tessera_constrained_requests_total\{.*kind="json_schema"/)).toBeGreaterThan(0);
    expect(value(/^tessera_constrained_requests_total\{.*kind="tool_arguments"/)).toBeGreaterThan(0);
    expect(value(/^tessera_jump_forward_tokens_total\{/)).toBeGreaterThan(0);
    expect(value(/^tessera_grammar_compile_seconds_count\{/)).toBeGreaterThan(0);
    expect(value(/^tessera_grammar_step_seconds_count\{/)).toBeGreaterThan(0);
    expect(value(/^tessera_constrained_replies_total\{.*finish_reason="stop"/)).toBeGreaterThan(0);
    expect(value(/^tessera_constrained_replies_total\{.*finish_reason="tool_calls"/)).toBeGreaterThan(0);
    expect(text).toContain("# TYPE tessera_loop_guard_interventions_total counter");
  });
});

describe("Vercel AI SDK", () => {
  it("generateObject with supportsStructuredOutputs returns an object of the schema", async () => {
    const provider = createOpenAICompatible({
      name: "tessera",
      baseURL: `${tessera.url}/v1`,
      apiKey: tessera.key,
      supportsStructuredOutputs: true,
    });
    const { object } = await generateObject({ model: provider(MODEL), schema: Definition, prompt: "Define the word tree.", maxRetries: 0 });
    expect(Definition.safeParse(object).success).toBe(true);
  });
});

describe("LangChain", () => {
  const chat = () => new ChatOpenAI({ model: MODEL, apiKey: tessera.key, configuration: { baseURL: `${tessera.url}/v1` }, maxRetries: 0 });

  it("withStructuredOutput, method jsonSchema", async () => {
    const result = await chat().withStructuredOutput(Definition, { method: "jsonSchema" }).invoke("Define the word rain.");
    expect(Definition.safeParse(result).success).toBe(true);
  });

  it("withStructuredOutput, method functionCalling", async () => {
    const result = await chat()
      .withStructuredOutput(Definition, { method: "functionCalling", name: "definition" })
      .invoke("Define the word snow.");
    expect(Definition.safeParse(result).success).toBe(true);
  });
});
