// From a Generate request to the rendered prompt: roles, text parts, tools and tool choice,
// tool calls and tool results, JSON modes, thinking; and what is refused.
import { readFileSync } from "node:fs";
import path from "node:path";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import {
  ChatMessageSchema,
  GenerationOptionsSchema,
  ResponseFormatType,
  Role,
  ToolChoiceMode,
  ToolCallSchema,
  ToolDefinitionSchema,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { buildChatPrompt, withForcedTool, type ChatTemplateVariables } from "./chat-prompt.js";
import type { ModelCapabilities } from "../core/model-config.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/inference-engine.js";
import { toConnectError } from "../connect-errors.js";

const template = new Template(JSON.parse(readFileSync(path.join(TINY_MODEL_DIR, "tokenizer_config.json"), "utf8")).chat_template as string);
const render = (v: ChatTemplateVariables) => template.render(v as unknown as Record<string, unknown>);
const ALL: ModelCapabilities = { images: false, tools: true, thinking: true };

interface Extra {
  toolCalls?: { id?: string; name: string; arguments?: string }[];
  toolCallId?: string;
}
const msg = (role: Role, text: string, extra: Extra = {}) =>
  create(ChatMessageSchema, {
    role,
    content: text === "" ? [] : [{ part: { case: "text", value: text } }],
    toolCalls: (extra.toolCalls ?? []).map((c) => create(ToolCallSchema, c)),
    toolCallId: extra.toolCallId ?? "",
  });
const tool = create(ToolDefinitionSchema, {
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } } },
});
const options = (init: MessageInitShape<typeof GenerationOptionsSchema>) => create(GenerationOptionsSchema, init);

function prompt(input: Partial<Parameters<typeof buildChatPrompt>[2]>, caps = ALL) {
  return buildChatPrompt("m1", caps, { messages: [msg(Role.USER, "hi")], tools: [], options: undefined, ...input });
}

function refusal(run: () => unknown): ConnectError {
  try {
    run();
  } catch (err) {
    return ConnectError.from(toConnectError(err));
  }
  throw new Error("expected a refusal");
}

describe("buildChatPrompt", () => {
  it("renders a plain conversation ending in the assistant header", () => {
    const p = prompt({ messages: [msg(Role.SYSTEM, "Be brief."), msg(Role.USER, "hi")] });
    expect(render(p.variables)).toBe("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    expect(p.parser).toEqual({ thinking: false, jsonMode: false, toolCalls: false });
  });

  it("joins text parts with a newline", () => {
    const m = create(ChatMessageSchema, {
      role: Role.USER,
      content: [{ part: { case: "text", value: "one" } }, { part: { case: "text", value: "two" } }],
    });
    expect(prompt({ messages: [m] }).variables.messages[0]!.content).toBe("one\ntwo");
  });

  it("presents tools as OpenAI function objects, and a tool round trip", () => {
    const p = prompt({
      messages: [
        msg(Role.USER, "Weather in Paris?"),
        msg(Role.ASSISTANT, "", { toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city": "Paris"}' }] }),
        msg(Role.TOOL, '{"temp": 21}', { toolCallId: "call_1" }),
      ],
      tools: [tool],
    });
    const text = render(p.variables);
    expect(text).toContain(
      '{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object"',
    );
    expect(text).toContain(
      '<|im_start|>assistant\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>',
    );
    expect(text).toContain('<|im_start|>tool\n<tool_response>{"temp": 21}</tool_response><|im_end|>');
    expect(p.parser.toolCalls).toBe(true);
  });

  it("a named function ends the prompt inside that call", () => {
    const p = prompt({ tools: [tool], options: options({ toolChoice: { choice: { case: "functionName", value: "get_weather" } } }) });
    expect(render(p.variables).endsWith('<|im_start|>assistant\n<tool_call>{"name": "get_weather", "arguments": ')).toBe(true);
    expect(p.parser).toMatchObject({ forcedTool: "get_weather", thinking: false });
  });

  it("required with one tool is that tool; none hides the tools", () => {
    const required = prompt({
      tools: [tool],
      options: options({ toolChoice: { choice: { case: "mode", value: ToolChoiceMode.REQUIRED } } }),
    });
    expect(required.parser.forcedTool).toBe("get_weather");
    const none = prompt({ tools: [tool], options: options({ toolChoice: { choice: { case: "mode", value: ToolChoiceMode.NONE } } }) });
    expect(render(none.variables)).not.toContain("<tools>");
    expect(none.parser.toolCalls).toBe(false);
  });

  it("required with several tools leaves the choice to the service: their names once each, in order", () => {
    const tools = ["search", "get_weather", "search", "book"].map((name) => create(ToolDefinitionSchema, { name }));
    const p = prompt({ tools, options: options({ toolChoice: { choice: { case: "mode", value: ToolChoiceMode.REQUIRED } } }) });
    expect(p.requiredTools).toEqual(["search", "get_weather", "book"]);
    expect(p.variables.forced_tool).toBe("");
    expect(p.parser.forcedTool).toBeUndefined();
    expect(
      prompt({ tools: [tool, tool], options: options({ toolChoice: { choice: { case: "mode", value: ToolChoiceMode.REQUIRED } } }) }).parser
        .forcedTool,
    ).toBe("get_weather");
    expect(prompt({ tools }).requiredTools).toEqual([]);
  });

  it("withForcedTool gives exactly the named tool_choice's prompt, thinking or not", () => {
    const tools = [tool, create(ToolDefinitionSchema, { name: "search" })];
    for (const enableThinking of [false, true]) {
      const required = prompt({
        tools,
        options: options({ enableThinking, toolChoice: { choice: { case: "mode", value: ToolChoiceMode.REQUIRED } } }),
      });
      const named = prompt({
        tools,
        options: options({ enableThinking, toolChoice: { choice: { case: "functionName", value: "search" } } }),
      });
      const forced = withForcedTool(required, "search");
      expect(forced.variables).toEqual(named.variables);
      expect(forced.parser).toEqual(named.parser);
      expect(forced.requiredTools).toEqual([]);
      expect(render(forced.variables).endsWith('<|im_start|>assistant\n<tool_call>{"name": "search", "arguments": ')).toBe(true);
    }
    expect(refusal(() => withForcedTool(prompt({ tools }), "missing")).code).toBe(Code.InvalidArgument);
  });

  it("JSON modes tell the model to answer with JSON, with the schema when given", () => {
    const obj = prompt({ options: options({ responseFormat: { type: ResponseFormatType.JSON_OBJECT } }) });
    expect(render(obj.variables)).toContain("Reply with one JSON object only.");
    expect(obj.parser.jsonMode).toBe(true);
    const schema = prompt({
      options: options({
        responseFormat: {
          type: ResponseFormatType.JSON_SCHEMA,
          jsonSchema: { name: "answer", schema: { type: "object", properties: { a: { type: "number" } } } },
        },
      }),
    });
    expect(render(schema.variables)).toContain('Schema: {"type": "object", "properties": {"a": {"type": "number"}}}');
  });

  it("thinking opens the thinking span, only for a model that thinks", () => {
    const on = prompt({ options: options({ enableThinking: true }) });
    expect(render(on.variables).endsWith("<|im_start|>assistant\n<think>\n")).toBe(true);
    expect(on.parser.thinking).toBe(true);
    const noThinking = prompt({ options: options({ enableThinking: true }) }, { ...ALL, thinking: false });
    expect(noThinking.parser.thinking).toBe(false);
  });

  it("refuses images for a model without image support before reading the URL", () => {
    const image = create(ChatMessageSchema, {
      role: Role.USER,
      content: [{ part: { case: "imageUrl", value: { url: "http://169.254.169.254/latest" } } }],
    });
    const err = refusal(() => prompt({ messages: [image] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.message).toContain('"m1"');
    const remote = refusal(() => prompt({ messages: [image] }, { ...ALL, images: true }));
    expect(remote.message).toContain("data:");
  });

  it("refuses what cannot be rendered", () => {
    expect(refusal(() => prompt({ messages: [] })).code).toBe(Code.InvalidArgument);
    expect(refusal(() => prompt({ messages: [msg(Role.UNSPECIFIED, "x")] })).message).toContain("role");
    expect(refusal(() => prompt({ tools: [tool] }, { ...ALL, tools: false })).message).toContain("tools");
    expect(
      refusal(() => prompt({ options: options({ toolChoice: { choice: { case: "mode", value: ToolChoiceMode.REQUIRED } } }) })).code,
    ).toBe(Code.InvalidArgument);
    expect(refusal(() => prompt({ messages: [msg(Role.USER, "x", { toolCalls: [{ name: "f" }] })] })).message).toContain("assistant");
  });
});
