// The playground's logic that needs no page: the SSE parser, the chat request it sends, the
// errors it shows, the question templates, how a token is shown in a cell.
import { describe, expect, it } from "vitest";
import { apiErrorFrom, errorFromBody } from "./api-error.js";
import { chatRequestBody, type ChatSettings, SettingsError, unansweredToolCalls } from "./chat/chat-request.js";
import { visibleToken } from "./chat/denoise-view.js";
import { addTemplate } from "./decisions/templates.js";
import { SseParser } from "./sse.js";

const headers = (h: Record<string, string>) => ({ get: (name: string) => h[name] ?? null });

describe("SseParser", () => {
  it("yields each event's data however the text is split, skipping comments, joining data lines", () => {
    const wire = ': keep-alive\n\ndata: {"a":1}\n\ndata: line one\r\ndata:line two\r\n\r\nevent: x\ndata: [DONE]\n\n';
    for (const size of [1, 2, 3, 7, wire.length]) {
      const parser = new SseParser();
      const out: string[] = [];
      for (let i = 0; i < wire.length; i += size) out.push(...parser.push(wire.slice(i, i + size)));
      expect(out, `pieces of ${size}`).toEqual(['{"a":1}', "line one\nline two", "[DONE]"]);
    }
  });
});

const settings: ChatSettings = {
  model: "textmodel-26b",
  system: "",
  maxTokens: "",
  thinking: false,
  jsonMode: "off",
  schema: "",
  tools: [],
  toolChoice: "auto",
};

describe("chatRequestBody", () => {
  it("streams with usage and the denoising steps; only what the form sets", () => {
    expect(chatRequestBody(settings, [{ role: "user", content: "hi" }])).toEqual({
      model: "textmodel-26b",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true, include_denoising: true },
    });
  });

  it("system prompt, max tokens, thinking, JSON with a schema, tools and tool choice", () => {
    const body = chatRequestBody(
      {
        ...settings,
        system: "Be brief.",
        maxTokens: "64",
        thinking: true,
        jsonMode: "json_schema",
        schema: '{"type": "object"}',
        tools: [{ name: "get_weather", description: "", parameters: '{"type": "object", "properties": {}}' }],
        toolChoice: "required",
      },
      [{ role: "user", content: "hi" }],
    );
    expect(body).toMatchObject({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
      max_tokens: 64,
      chat_template_kwargs: { enable_thinking: true },
      response_format: { type: "json_schema", json_schema: { name: "reply", schema: { type: "object" } } },
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } }],
      tool_choice: "required",
    });
    expect(chatRequestBody({ ...settings, jsonMode: "json_schema" }, [])["response_format"]).toEqual({ type: "json_object" });
  });

  it("names what cannot be sent: bad max tokens, a schema that is not JSON, a tool without a name", () => {
    expect(() => chatRequestBody({ ...settings, maxTokens: "1.5" }, [])).toThrow(SettingsError);
    expect(() => chatRequestBody({ ...settings, jsonMode: "json_schema", schema: "{type: object}" }, [])).toThrow(
      /JSON schema is not valid JSON/,
    );
    expect(() => chatRequestBody({ ...settings, tools: [{ name: "", description: "", parameters: "{}" }] }, [])).toThrow(
      /tool 1: the name/,
    );
    expect(() => chatRequestBody({ ...settings, tools: [{ name: "f", description: "", parameters: "[]" }] }, [])).toThrow(
      /must be a JSON object/,
    );
  });

  it("the open tool calls are those of the last assistant turn without a tool message", () => {
    const call = (id: string) => ({ id, type: "function" as const, function: { name: "f", arguments: "{}" } });
    expect(unansweredToolCalls([{ role: "user", content: "x" }])).toEqual([]);
    const history = [
      { role: "user" as const, content: "x" },
      { role: "assistant" as const, content: null, tool_calls: [call("a"), call("b")] },
      { role: "tool" as const, content: "1", tool_call_id: "a" },
    ];
    expect(unansweredToolCalls(history).map((c) => c.id)).toEqual(["b"]);
  });
});

describe("API errors", () => {
  it("reads both body shapes, the validation list, retry-after and the request id", () => {
    const openai = apiErrorFrom(
      529,
      JSON.stringify({ error: { message: "every slot is busy", type: "overloaded_error", code: "overloaded" } }),
      headers({ "retry-after": "2", "x-service-request-id": "req_1" }),
    );
    expect(openai).toMatchObject({
      status: 529,
      type: "overloaded_error",
      message: "every slot is busy",
      extra: { code: "overloaded", retryAfter: "2", requestId: "req_1" },
    });
    const detail = apiErrorFrom(429, JSON.stringify({ detail: { error_type: "rate_limit_error", message: "slow down" } }), headers({}));
    expect(detail).toMatchObject({ status: 429, type: "rate_limit_error", message: "slow down" });
    const invalid = errorFromBody(422, { detail: [{ loc: ["body", "questions", "q"], msg: "criteria is required", type: "missing" }] });
    expect(invalid.extra.details).toEqual(["body.questions.q: criteria is required (missing)"]);
    expect(invalid.type).toBe("validation_error");
    const both = errorFromBody(422, {
      detail: [{ loc: ["body", "state"], msg: "Field required", type: "missing" }],
      error: { message: "body.state: Field required", type: "invalid_request_error", code: "missing" },
    });
    expect(both).toMatchObject({ type: "invalid_request_error", message: "body.state: Field required", extra: { code: "missing" } });
    expect(both.extra.details).toEqual(["body.state: Field required (missing)"]);
    expect(apiErrorFrom(502, "<html>bad gateway</html>", headers({}))).toMatchObject({
      status: 502,
      type: "http_error",
      message: "<html>bad gateway</html>",
    });
  });
});

describe("question templates", () => {
  it("add each type under a fresh id and keep what is there", () => {
    let text = addTemplate("", "noul");
    text = addTemplate(text, "choice");
    text = addTemplate(text, "choice");
    text = addTemplate(text, "score");
    const questions = JSON.parse(text) as Record<string, { type: string }>;
    expect(Object.entries(questions).map(([id, q]) => `${id}:${q.type}`)).toEqual([
      "spam:noul",
      "topic:choice",
      "topic_2:choice",
      "urgency:score",
    ]);
    expect(() => addTemplate("[1]", "noul")).toThrow(/JSON object/);
    expect(() => addTemplate("{", "noul")).toThrow();
  });
});

describe("visibleToken", () => {
  it("shows whitespace and the empty token", () => {
    expect(visibleToken(" the")).toBe("␣the");
    expect(visibleToken("\n")).toBe("⏎");
    expect(visibleToken("")).toBe("∅");
    expect(visibleToken("<|im_end|>")).toBe("<|im_end|>");
  });
});
