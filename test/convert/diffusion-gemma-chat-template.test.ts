// Tools, tool messages and thinking on a canvas model: the tiny DiffusionGemma's prompts as the
// service renders them (gateway's parseChatRequest -> renderCanvasChat: chat-prompt.ts,
// checkpoint-template.ts, the checkpoint's own template in @huggingface/jinja) equal, string for
// string, what transformers' apply_chat_template renders for the same OpenAI messages; and the
// converted config.json names Gemma 4's reply format.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseChatRequest } from "../../gateway/mappers/chat.js";
import { renderCanvasChat } from "../../services/inference/canvas/canvas-service.js";
import { type CanvasModel, loadCanvasModel } from "../../services/inference/decoder/canvas/canvas-model.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE, runConvertPython } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] },
  },
};
const TIME = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } } } } };
const call = (id: string, name: string, args: string) => ({ id, type: "function", function: { name, arguments: args } });

/** OpenAI chat requests, each rendered both ways. */
const REQUESTS: Record<string, unknown>[] = [
  { messages: [{ role: "user", content: "Weather in Paris?" }], tools: [WEATHER, TIME] },
  {
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          call(
            "call_1",
            "get_weather",
            '{"city": "Paris", "days": 2, "metric": true, "tags": ["a", "b"], "where": {"lat": 48.5}, "x": null}',
          ),
          call("call_2", "get_time", '{"zone": "CET"}'),
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" },
      { role: "tool", tool_call_id: "call_2", content: '{"time": "10:00"}' },
      { role: "assistant", content: "Sunny, and it is ten." },
      { role: "user", content: "And tomorrow?" },
    ],
    tools: [WEATHER, TIME],
    chat_template_kwargs: { enable_thinking: true },
  },
  // The reply so far ends in a tool response: the model's turn goes on (no new turn opened).
  {
    messages: [
      { role: "user", content: "Time?" },
      { role: "assistant", content: "", tool_calls: [call("c", "get_time", "{}")] },
      { role: "tool", tool_call_id: "c", content: "10:00" },
    ],
    tools: [TIME],
  },
  { messages: [{ role: "user", content: "Think first: 2 + 2?" }], chat_template_kwargs: { enable_thinking: true } },
  // tool_choice none: the tools are not shown, as transformers renders without them.
  { messages: [{ role: "user", content: "hi" }], tools: [WEATHER], tool_choice: "none" },
];

describe.skipIf(!HAVE_CONVERT_VENV)("the tiny DiffusionGemma's chat template: tools, tool messages, thinking", () => {
  const dir = mkdtempSync(join(tmpdir(), "dg-chat-"));
  let model: CanvasModel;
  let modelDir: string;
  let reference: string[];

  beforeAll(async () => {
    modelDir = (await diffusionGemmaFixture()).model;
    model = await loadCanvasModel(modelDir);
    const cases = REQUESTS.map((r) => ({
      messages: r.messages,
      tools: r.tool_choice === "none" ? null : (r.tools ?? null),
      enable_thinking: (r.chat_template_kwargs as { enable_thinking?: boolean } | undefined)?.enable_thinking ?? false,
    }));
    writeFileSync(join(dir, "cases.json"), JSON.stringify(cases));
    const { stdout } = await runConvertPython(["convert/tests/render_chat.py", modelDir, join(dir, "cases.json")]);
    reference = JSON.parse(stdout) as string[];
  }, 600_000);

  afterAll(async () => {
    await model?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("config.json names Gemma 4's reply format, tools and thinking, and <|tool_response> ends a reply", () => {
    const config = JSON.parse(readFileSync(join(modelDir, "config.json"), "utf8"));
    expect(config.capabilities).toMatchObject({ tools: true, thinking: true, grammar: true });
    expect(config.special_tokens).toEqual({
      tool_call: ["<|tool_call>", "<tool_call|>"],
      tool_call_format: "gemma4",
      thinking: ["<|channel>thought", "<channel|>"],
    });
    expect(model.tokenizer.decode(config.stop_token_ids)).toContain("<|tool_response>");
    expect(model.config).toMatchObject({ tools: true, thinking: true });
  });

  it("renders every request exactly as transformers' apply_chat_template does", () => {
    expect(reference).toHaveLength(REQUESTS.length);
    REQUESTS.forEach((body, i) => {
      const parsed = parseChatRequest({ model: "dg", ...body });
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.error));
      const { text } = renderCanvasChat(model, false, parsed.request);
      expect(text, `request ${i}`).toBe(reference[i]);
    });
    // The markup the reply parser reads is really there.
    expect(reference[1]).toContain('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2,');
    expect(reference[1]).toContain('<|tool_response>response:get_weather{value:<|"|>sunny, 21 C<|"|>}<tool_response|>');
    expect(reference[1]).toContain("<|think|>");
    expect(reference[4]).not.toContain("<|tool>");
  });
});
