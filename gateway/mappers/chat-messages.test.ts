// parseChatRequest: the messages of a chat completions body (roles, parts, tool calls and results).
import { describe, expect, it } from "vitest";
import { Role } from "../../gen/tessera/inference/v1/inference_pb.js";
import { fails, ok } from "../../test/helpers/chat-request.js";

describe("parseChatRequest: messages", () => {
  it("maps every role, developer as system", () => {
    const { request } = ok({
      model: "m",
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "system", content: [{ type: "text", text: "Be kind." }] },
        { role: "user", content: "What is the weather in Paris?", name: "ann" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temp": 21}' },
        { role: "assistant", content: "It is 21 degrees.", reasoning: "I read the tool." },
      ],
    });
    const roles = request.messages.map((m) => m.role);
    expect(roles).toEqual([Role.SYSTEM, Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]);
    expect(request.messages[2]!.name).toBe("ann");
    expect(request.messages[3]!.content).toEqual([]);
    expect(request.messages[3]!.toolCalls).toMatchObject([{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }]);
    expect(request.messages[4]!.toolCallId).toBe("call_1");
    expect(request.messages[5]!.reasoning).toBe("I read the tool.");
  });

  it("keeps text parts in order and takes data: image parts on user messages", () => {
    const url = "data:image/png;base64,iVBORw0KGgo=";
    const { request } = ok({
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is in" },
            { type: "image_url", image_url: { url, detail: "low" } },
            { type: "text", text: "this image?" },
            { type: "image_url", image_url: url },
          ],
        },
      ],
    });
    const parts = request.messages[0]!.content.map((p) => p.part);
    expect(parts[0]).toEqual({ case: "text", value: "What is in" });
    expect(parts[1]).toMatchObject({ case: "imageUrl", value: { url, detail: "low" } });
    expect(parts[2]).toEqual({ case: "text", value: "this image?" });
    expect(parts[3]).toMatchObject({ case: "imageUrl", value: { url, detail: "" } });
  });

  it("accepts assistant tool-call arguments given as an object", () => {
    const { request } = ok({
      model: "m",
      messages: [{ role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: { a: 1 } } }] }],
    });
    expect(request.messages[0]!.toolCalls[0]!.arguments).toBe('{"a":1}');
  });

  const img = (url: unknown) => ({ model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] });

  it.each<[string, unknown, string, string]>([
    ["a message that is a string", { model: "m", messages: ["hi"] }, "messages[0]", "invalid_type"],
    ["a message without role", { model: "m", messages: [{ content: "x" }] }, "messages[0].role", "missing_required_parameter"],
    [
      "an unknown role in the third message",
      {
        model: "m",
        messages: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
          { role: "robot", content: "c" },
        ],
      },
      "messages[2].role",
      "invalid_value",
    ],
    ["the role 'function'", { model: "m", messages: [{ role: "function", content: "x" }] }, "messages[0].role", "invalid_value"],
    ["a prototype key as role", { model: "m", messages: [{ role: "constructor", content: "x" }] }, "messages[0].role", "invalid_value"],
    ["a numeric name", { model: "m", messages: [{ role: "user", content: "x", name: 1 }] }, "messages[0].name", "invalid_type"],
    ["user content missing", { model: "m", messages: [{ role: "user" }] }, "messages[0].content", "missing_required_parameter"],
    ["user content null", { model: "m", messages: [{ role: "user", content: null }] }, "messages[0].content", "missing_required_parameter"],
    ["user content a number", { model: "m", messages: [{ role: "user", content: 5 }] }, "messages[0].content", "invalid_type"],
    ["user content an empty array", { model: "m", messages: [{ role: "user", content: [] }] }, "messages[0].content", "empty_array"],
    ["a part that is a string", { model: "m", messages: [{ role: "user", content: ["x"] }] }, "messages[0].content[0]", "invalid_type"],
    [
      "a part without type",
      { model: "m", messages: [{ role: "user", content: [{ text: "x" }] }] },
      "messages[0].content[0].type",
      "missing_required_parameter",
    ],
    [
      "an audio part",
      { model: "m", messages: [{ role: "user", content: [{ type: "input_audio" }] }] },
      "messages[0].content[0].type",
      "invalid_value",
    ],
    [
      "a text part without text",
      { model: "m", messages: [{ role: "user", content: [{ type: "text" }] }] },
      "messages[0].content[0].text",
      "missing_required_parameter",
    ],
    [
      "a text part with numeric text",
      { model: "m", messages: [{ role: "user", content: [{ type: "text", text: 1 }] }] },
      "messages[0].content[0].text",
      "invalid_type",
    ],
    [
      "an image part without image_url",
      { model: "m", messages: [{ role: "user", content: [{ type: "image_url" }] }] },
      "messages[0].content[0].image_url",
      "missing_required_parameter",
    ],
    [
      "an image without url",
      { model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] },
      "messages[0].content[0].image_url.url",
      "missing_required_parameter",
    ],
    ["an image url that is a number", img(3), "messages[0].content[0].image_url.url", "invalid_type"],
    ["a remote image url", img("https://example.com/cat.png"), "messages[0].content[0].image_url.url", "invalid_value"],
    ["a data url that is not an image", img("data:text/plain;base64,aGk="), "messages[0].content[0].image_url.url", "invalid_value"],
    [
      "an unknown image detail",
      {
        model: "m",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AA==", detail: "max" } }] }],
      },
      "messages[0].content[0].image_url.detail",
      "invalid_value",
    ],
    [
      "an image in a system message",
      { model: "m", messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }] }] },
      "messages[0].content[0].type",
      "invalid_value",
    ],
    [
      "an assistant message with neither content nor calls",
      { model: "m", messages: [{ role: "assistant" }] },
      "messages[0].content",
      "missing_required_parameter",
    ],
    [
      "assistant tool_calls as an object",
      { model: "m", messages: [{ role: "assistant", tool_calls: {} }] },
      "messages[0].tool_calls",
      "invalid_type",
    ],
    [
      "an assistant call without id",
      { model: "m", messages: [{ role: "assistant", tool_calls: [{ type: "function", function: { name: "f", arguments: "{}" } }] }] },
      "messages[0].tool_calls[0].id",
      "missing_required_parameter",
    ],
    [
      "an assistant call of another type",
      { model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "custom", function: { name: "f" } }] }] },
      "messages[0].tool_calls[0].type",
      "invalid_value",
    ],
    [
      "an assistant call without function",
      { model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "function" }] }] },
      "messages[0].tool_calls[0].function",
      "missing_required_parameter",
    ],
    [
      "an assistant call with numeric arguments",
      { model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: 1 } }] }] },
      "messages[0].tool_calls[0].function.arguments",
      "invalid_type",
    ],
    [
      "a tool message without tool_call_id",
      { model: "m", messages: [{ role: "tool", content: "x" }] },
      "messages[0].tool_call_id",
      "missing_required_parameter",
    ],
    [
      "a tool message answering no call",
      {
        model: "m",
        messages: [
          { role: "assistant", tool_calls: [{ id: "call_1", function: { name: "f", arguments: "{}" } }] },
          { role: "tool", tool_call_id: "call_2", content: "x" },
        ],
      },
      "messages[1].tool_call_id",
      "invalid_value",
    ],
    [
      "a tool message without content",
      { model: "m", messages: [{ role: "tool", tool_call_id: "c" }] },
      "messages[0].content",
      "missing_required_parameter",
    ],
  ])("rejects %s", (_name, body, param, code) => {
    expect(fails(body)).toMatchObject({ param, code });
  });
});
