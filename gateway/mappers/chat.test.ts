// parseChatRequest: the chat completions body to a GenerateRequest. Messages: chat-messages.test.ts.
import { describe, expect, it } from "vitest";
import { ResponseFormatType, Role, ToolChoiceMode } from "../../gen/tessera/inference/v1/inference_pb.js";
import { base, fails, nested, ok, weatherTool } from "../../test/helpers/chat-request.js";
import { parseChatRequest } from "./chat.js";

describe("parseChatRequest: a minimal request and its defaults", () => {
  it("maps model and messages, with max_tokens 1024 and no stream", () => {
    const { request, stream, includeUsage } = ok(base, { requestId: "req_1" });
    expect(request.requestId).toBe("req_1");
    expect(request.model).toBe("textmodel-26b");
    expect(request.messages).toHaveLength(1);
    expect(request.messages[0]!.role).toBe(Role.USER);
    expect(request.messages[0]!.content[0]!.part).toEqual({ case: "text", value: "Hi" });
    expect(request.options?.maxTokens).toBe(1024);
    expect(request.options?.stop).toEqual([]);
    expect(request.options?.enableThinking).toBe(false);
    expect(request.options?.responseFormat).toBeUndefined();
    expect(request.options?.toolChoice).toBeUndefined();
    expect(request.tools).toEqual([]);
    expect(stream).toBe(false);
    expect(includeUsage).toBe(false);
  });

  it("takes a configured default and cap", () => {
    expect(ok(base, { maxTokens: 64 }).request.options?.maxTokens).toBe(64);
    expect(ok({ ...base, max_tokens: 500 }, { maxTokensCap: 256 }).request.options?.maxTokens).toBe(256);
  });
});

describe("parseChatRequest: max_tokens", () => {
  it("caps at 8192 instead of rejecting", () => {
    expect(ok({ ...base, max_tokens: 8192 }).request.options?.maxTokens).toBe(8192);
    expect(ok({ ...base, max_tokens: 100_000 }).request.options?.maxTokens).toBe(8192);
    expect(ok({ ...base, max_tokens: 1e21 }).request.options?.maxTokens).toBe(8192);
  });

  it("accepts max_completion_tokens as a synonym, preferred over max_tokens", () => {
    expect(ok({ ...base, max_completion_tokens: 5 }).request.options?.maxTokens).toBe(5);
    expect(ok({ ...base, max_completion_tokens: 7, max_tokens: 9 }).request.options?.maxTokens).toBe(7);
    expect(ok({ ...base, max_tokens: null }).request.options?.maxTokens).toBe(1024);
  });

  it.each([
    [0, "max_tokens", "invalid_value"],
    [-3, "max_tokens", "invalid_value"],
    [2.5, "max_tokens", "invalid_value"],
    ["10", "max_tokens", "invalid_type"],
    [true, "max_tokens", "invalid_type"],
  ])("rejects max_tokens %j", (value, param, code) => {
    expect(fails({ ...base, max_tokens: value })).toMatchObject({ param, code });
    expect(fails({ ...base, max_completion_tokens: value })).toMatchObject({ param: "max_completion_tokens", code });
  });
});

describe("parseChatRequest: top-level errors name their field", () => {
  it.each<[string, unknown, string | null, string]>([
    ["a non-object body", [1, 2], null, "invalid_type"],
    ["a null body", null, null, "invalid_type"],
    ["no model", { messages: base.messages }, "model", "missing_required_parameter"],
    ["a numeric model", { ...base, model: 26 }, "model", "invalid_type"],
    ["an empty model", { ...base, model: " " }, "model", "invalid_value"],
    ["no messages", { model: "m" }, "messages", "missing_required_parameter"],
    ["messages as an object", { model: "m", messages: { role: "user" } }, "messages", "invalid_type"],
    ["empty messages", { model: "m", messages: [] }, "messages", "empty_array"],
    ["stream as a string", { ...base, stream: "yes" }, "stream", "invalid_type"],
    ["stream_options as a string", { ...base, stream_options: "x" }, "stream_options", "invalid_type"],
    ["include_usage as a number", { ...base, stream_options: { include_usage: 1 } }, "stream_options.include_usage", "invalid_type"],
    ["n = 2", { ...base, n: 2 }, "n", "invalid_value"],
    ["n = 0", { ...base, n: 0 }, "n", "invalid_value"],
    ["n as a string", { ...base, n: "1" }, "n", "invalid_type"],
    ["stop as a number", { ...base, stop: 3 }, "stop", "invalid_type"],
    ["5 stop sequences", { ...base, stop: ["a", "b", "c", "d", "e"] }, "stop", "invalid_value"],
    ["a non-string stop sequence", { ...base, stop: ["a", 1] }, "stop[1]", "invalid_type"],
    ["an empty stop sequence", { ...base, stop: ["a", ""] }, "stop[1]", "invalid_value"],
    ["an empty stop string", { ...base, stop: "" }, "stop", "invalid_value"],
    ["response_format as a string", { ...base, response_format: "json" }, "response_format", "invalid_type"],
    ["response_format without type", { ...base, response_format: {} }, "response_format.type", "missing_required_parameter"],
    ["an unknown response_format", { ...base, response_format: { type: "yaml" } }, "response_format.type", "invalid_value"],
    [
      "json_schema without its schema",
      { ...base, response_format: { type: "json_schema" } },
      "response_format.json_schema",
      "missing_required_parameter",
    ],
    [
      "json_schema as a string",
      { ...base, response_format: { type: "json_schema", json_schema: "{}" } },
      "response_format.json_schema",
      "invalid_type",
    ],
    [
      "a json_schema nested 65 deep",
      { ...base, response_format: { type: "json_schema", json_schema: nested(65) } },
      "response_format.json_schema",
      "invalid_value",
    ],
    ["chat_template_kwargs as an array", { ...base, chat_template_kwargs: [] }, "chat_template_kwargs", "invalid_type"],
    [
      "enable_thinking as a string",
      { ...base, chat_template_kwargs: { enable_thinking: "true" } },
      "chat_template_kwargs.enable_thinking",
      "invalid_type",
    ],
  ])("%s", (_name, body, param, code) => {
    const error = fails(body);
    expect(error).toMatchObject({ param, code });
    expect(error.message.length).toBeGreaterThan(10);
    if (param !== null) expect(error.message).toContain(param);
  });
});

describe("parseChatRequest: response_format, thinking, stream", () => {
  it("maps json_object and json_schema (schema passed through)", () => {
    expect(ok({ ...base, response_format: { type: "json_object" } }).request.options?.responseFormat?.type).toBe(
      ResponseFormatType.JSON_OBJECT,
    );
    const schema = { name: "person", schema: { type: "object", properties: { name: { type: "string" } } }, strict: true };
    const format = ok({ ...base, response_format: { type: "json_schema", json_schema: schema } }).request.options?.responseFormat;
    expect(format?.type).toBe(ResponseFormatType.JSON_SCHEMA);
    expect(format?.jsonSchema).toEqual(schema);
    expect(ok({ ...base, response_format: { type: "text" } }).request.options?.responseFormat?.type).toBe(ResponseFormatType.TEXT);
    expect(ok({ ...base, response_format: null }).request.options?.responseFormat).toBeUndefined();
  });

  it("turns thinking on only when asked", () => {
    expect(ok({ ...base, chat_template_kwargs: { enable_thinking: true } }).request.options?.enableThinking).toBe(true);
    expect(ok({ ...base, chat_template_kwargs: { enable_thinking: false, other: 1 } }).request.options?.enableThinking).toBe(false);
    expect(ok({ ...base, chat_template_kwargs: {} }).request.options?.enableThinking).toBe(false);
  });

  it("reads stream and stream_options.include_usage", () => {
    expect(ok({ ...base, stream: true, stream_options: { include_usage: true } })).toMatchObject({ stream: true, includeUsage: true });
    expect(ok({ ...base, stream: null })).toMatchObject({ stream: false, includeUsage: false });
  });

  it("takes stop as a string or a list", () => {
    expect(ok({ ...base, stop: "\n\n" }).request.options?.stop).toEqual(["\n\n"]);
    expect(ok({ ...base, stop: ["a", "b", "c", "d"] }).request.options?.stop).toEqual(["a", "b", "c", "d"]);
  });

  it("accepts the ignored fields whatever their type, and unknown fields", () => {
    const { request } = ok({
      ...base,
      temperature: "hot",
      seed: { x: 1 },
      min_p: 0.1,
      top_p: [1],
      logit_bias: { "50256": -100 },
      presence_penalty: null,
      frequency_penalty: 2,
      reasoning: { effort: "high" },
      reasoning_effort: "low",
      user: 42,
      logprobs: true,
      parallel_tool_calls: false,
      metadata: { a: "b" },
      some_future_field: { deep: [1, 2, 3] },
      n: 1,
    });
    expect(request.model).toBe("textmodel-26b");
  });
});

describe("parseChatRequest: tools and tool_choice", () => {
  it("maps function tools; tool_choice defaults to auto when tools are given", () => {
    const { request } = ok({ ...base, tools: [weatherTool] });
    expect(request.tools).toHaveLength(1);
    expect(request.tools[0]).toMatchObject({ name: "get_weather", description: "Weather of a city" });
    expect(request.tools[0]!.parameters).toEqual(weatherTool.function.parameters);
    expect(request.options?.toolChoice?.choice).toEqual({ case: "mode", value: ToolChoiceMode.AUTO });
  });

  it("maps auto, none, required and a named function", () => {
    const choiceOf = (tool_choice: unknown) => ok({ ...base, tools: [weatherTool], tool_choice }).request.options?.toolChoice?.choice;
    expect(choiceOf("auto")).toEqual({ case: "mode", value: ToolChoiceMode.AUTO });
    expect(choiceOf("none")).toEqual({ case: "mode", value: ToolChoiceMode.NONE });
    expect(choiceOf("required")).toEqual({ case: "mode", value: ToolChoiceMode.REQUIRED });
    expect(choiceOf({ type: "function", function: { name: "get_weather" } })).toEqual({ case: "functionName", value: "get_weather" });
  });

  it("accepts auto and none without tools", () => {
    expect(ok({ ...base, tool_choice: "none" }).request.options?.toolChoice?.choice).toEqual({ case: "mode", value: ToolChoiceMode.NONE });
    expect(ok({ ...base, tools: [], tool_choice: "auto" }).request.tools).toEqual([]);
  });

  it("takes schemas nested 64 deep", () => {
    expect(ok({ ...base, tools: [{ type: "function", function: { name: "f", parameters: nested(64) } }] }).request.tools).toHaveLength(1);
    expect(
      ok({ ...base, response_format: { type: "json_schema", json_schema: nested(64) } }).request.options?.responseFormat?.jsonSchema,
    ).toEqual(nested(64));
  });

  it("takes a tool without description or parameters", () => {
    const { request } = ok({ ...base, tools: [{ type: "function", function: { name: "ping" } }] });
    expect(request.tools[0]).toMatchObject({ name: "ping", description: "" });
    expect(request.tools[0]!.parameters).toBeUndefined();
  });

  const fn = (f: unknown) => ({ ...base, tools: [{ type: "function", function: f }] });

  it.each<[string, unknown, string, string]>([
    ["tools as an object", { ...base, tools: weatherTool }, "tools", "invalid_type"],
    ["a tool that is a string", { ...base, tools: ["get_weather"] }, "tools[0]", "invalid_type"],
    ["a tool without type", { ...base, tools: [{ function: { name: "f" } }] }, "tools[0].type", "missing_required_parameter"],
    ["a custom tool", { ...base, tools: [{ type: "custom", custom: { name: "f" } }] }, "tools[0].type", "invalid_value"],
    ["a tool without function", { ...base, tools: [{ type: "function" }] }, "tools[0].function", "missing_required_parameter"],
    ["a function without name", fn({ description: "x" }), "tools[0].function.name", "missing_required_parameter"],
    ["a numeric function name", fn({ name: 5 }), "tools[0].function.name", "invalid_type"],
    ["a function name with spaces", fn({ name: "get weather" }), "tools[0].function.name", "invalid_value"],
    ["a function name of 65 characters", fn({ name: "f".repeat(65) }), "tools[0].function.name", "invalid_value"],
    ["a numeric description", fn({ name: "f", description: 1 }), "tools[0].function.description", "invalid_type"],
    ["parameters as a string", fn({ name: "f", parameters: "{}" }), "tools[0].function.parameters", "invalid_type"],
    ["parameters nested 65 deep", fn({ name: "f", parameters: nested(65) }), "tools[0].function.parameters", "invalid_value"],
    ["two tools of one name", { ...base, tools: [weatherTool, weatherTool] }, "tools[1].function.name", "invalid_value"],
    [
      "129 tools",
      { ...base, tools: Array.from({ length: 129 }, (_, i) => ({ type: "function", function: { name: `f${i}` } })) },
      "tools",
      "invalid_value",
    ],
    ["an unknown tool_choice", { ...base, tools: [weatherTool], tool_choice: "any" }, "tool_choice", "invalid_value"],
    ["tool_choice as a number", { ...base, tools: [weatherTool], tool_choice: 1 }, "tool_choice", "invalid_type"],
    ["required without tools", { ...base, tool_choice: "required" }, "tool_choice", "invalid_value"],
    [
      "a named choice without type",
      { ...base, tools: [weatherTool], tool_choice: { function: { name: "get_weather" } } },
      "tool_choice.type",
      "missing_required_parameter",
    ],
    [
      "a named choice without function",
      { ...base, tools: [weatherTool], tool_choice: { type: "function" } },
      "tool_choice.function",
      "missing_required_parameter",
    ],
    [
      "a named choice without name",
      { ...base, tools: [weatherTool], tool_choice: { type: "function", function: {} } },
      "tool_choice.function.name",
      "missing_required_parameter",
    ],
    [
      "a named choice of a tool not offered",
      { ...base, tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_time" } } },
      "tool_choice.function.name",
      "invalid_value",
    ],
    [
      "a named choice without tools",
      { ...base, tool_choice: { type: "function", function: { name: "get_weather" } } },
      "tool_choice.function.name",
      "invalid_value",
    ],
  ])("rejects %s", (_name, body, param, code) => {
    expect(fails(body)).toMatchObject({ param, code });
  });
});

describe("parseChatRequest: hostile JSON", () => {
  it("does not let __proto__ keys reach anything", () => {
    const body = JSON.parse(
      '{"model":"m","messages":[{"role":"user","content":"x","__proto__":{"role":"system"}}],"__proto__":{"stream":true}}',
    );
    const parsed = ok(body);
    expect(parsed.stream).toBe(false);
    expect(parsed.request.messages[0]!.role).toBe(Role.USER);
    expect(({} as Record<string, unknown>)["stream"]).toBeUndefined();
  });

  it("answers every random body with a result, never a throw", async () => {
    const fc = (await import("fast-check")).default;
    fc.assert(
      fc.property(fc.anything(), fc.jsonValue(), (anything, json) => {
        for (const body of [
          anything,
          json,
          { ...base, messages: json },
          { model: "m", messages: [json] },
          { ...base, tools: json, tool_choice: json },
        ]) {
          const parsed = parseChatRequest(body);
          if (!parsed.ok) expect(typeof parsed.error.message).toBe("string");
        }
      }),
      { numRuns: 2000 },
    );
  });
});
