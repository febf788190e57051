import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChatSpecialTokens } from "../core/model-config.js";
import { cutGemma4Call, parseGemma4Call } from "./reply-gemma4.js";
import { createReplyParser, type ReplyParserOptions } from "./reply-parser.js";
import { splitAt } from "../../../test/helpers/text-chunks.js";

// Gemma 4's reply format, as a canvas model's config names it (convert/tessera_convert/diffusion_gemma.py).
const GEMMA4: ChatSpecialTokens = {
  toolCall: ["<|tool_call>", "<tool_call|>"],
  thinking: ["<|channel>thought", "<channel|>"],
  toolCallFormat: "gemma4",
};
const Q = '<|"|>';

function parse(chunks: string[], options: Partial<ReplyParserOptions> = {}) {
  let n = 0;
  const parser = createReplyParser({ thinking: false, jsonMode: false, tags: GEMMA4, newToolCallId: () => `call_${++n}`, ...options });
  const out = { content: "", reasoning: "", calls: new Map<number, { name: string; arguments: string }>(), sawToolCall: false };
  const take = (d: ReturnType<typeof parser.push>) => {
    out.content += d.content;
    out.reasoning += d.reasoning;
    for (const piece of d.toolCalls) {
      const call = out.calls.get(piece.index) ?? { name: "", arguments: "" };
      call.name ||= piece.name ?? "";
      call.arguments += piece.arguments;
      out.calls.set(piece.index, call);
    }
  };
  for (const chunk of chunks) take(parser.push(chunk));
  const end = parser.finish();
  take(end);
  out.sawToolCall = end.sawToolCall;
  return { ...out, toolCalls: [...out.calls.values()] };
}

describe("Gemma 4's call syntax", () => {
  it("reads every value kind of the template's format_argument into JSON", () => {
    const body = `call:get_weather{city:${Q}Paris, "the" {city}${Q},days:3,metric:true,note:null,ratio:-0.5,tags:[${Q}a${Q},${Q}b${Q}],where:{lat:48.8,lon:2.3}}`;
    expect(parseGemma4Call(body)).toEqual({
      name: "get_weather",
      arguments: JSON.stringify({
        city: 'Paris, "the" {city}',
        days: 3,
        metric: true,
        note: null,
        ratio: -0.5,
        tags: ["a", "b"],
        where: { lat: 48.8, lon: 2.3 },
      }),
    });
    expect(parseGemma4Call("call:ping{}")).toEqual({ name: "ping", arguments: "{}" });
    // Quoted keys (format_argument's escape_keys) and JSON strings are read too.
    expect(parseGemma4Call(`call:f{${Q}a b${Q}:"x\\"y"}`)).toEqual({ name: "f", arguments: '{"a b":"x\\"y"}' });
  });

  it("refuses what is not a call (the parser then leaves the span as text)", () => {
    for (const body of ["get_weather{}", "call:{}", "call:f", `call:f{a:${Q}open}`, "call:f{a:bare}", "call:f{a:1} extra", "call:f[1]"]) {
      expect(parseGemma4Call(body), body).toBeNull();
    }
  });

  it("keeps a cut call's name and its argument text once the name is complete", () => {
    expect(cutGemma4Call(`call:f{a:${Q}par`)).toEqual({ name: "f", arguments: `{a:${Q}par` });
    expect(cutGemma4Call("call:f")).toBeNull();
    expect(cutGemma4Call("cal")).toBeNull();
  });
});

describe("the reply parser on Gemma 4 replies", () => {
  const reply = `<|channel>thought\nThe user wants Paris.<channel|>Let me look.<|tool_call>call:get_weather{city:${Q}Paris${Q},days:2}<tool_call|><|tool_call>call:get_time{zone:${Q}CET${Q}}<tool_call|>`;

  it("splits thinking into reasoning and calls into tool_calls, however the text is cut", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 8 }), (cuts) => {
        const r = parse(splitAt(reply, cuts));
        expect(r.reasoning).toBe("The user wants Paris.");
        expect(r.content).toBe("Let me look.");
        expect(r.toolCalls).toEqual([
          { name: "get_weather", arguments: '{"city":"Paris","days":2}' },
          { name: "get_time", arguments: '{"zone":"CET"}' },
        ]);
        expect(r.sawToolCall).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("leaves calls as content with tool_choice none, and a malformed call as text", () => {
    const none = parse([reply], { toolCalls: false });
    expect(none.toolCalls).toEqual([]);
    expect(none.content).toContain("<|tool_call>call:get_weather{");
    const bad = parse(["Hi <|tool_call>get_weather(Paris)<tool_call|> there"]);
    expect(bad.toolCalls).toEqual([]);
    expect(bad.content).toBe("Hi <|tool_call>get_weather(Paris)<tool_call|> there");
  });

  it("turns a reply cut inside a call into the call so far (max_tokens)", () => {
    const r = parse([`Checking.<|tool_call>call:get_weather{city:${Q}Par`]);
    expect(r.content).toBe("Checking.");
    expect(r.toolCalls).toEqual([{ name: "get_weather", arguments: `{city:${Q}Par` }]);
  });

  it("passes a reply without markup through as content (thinking off: no channel span)", () => {
    expect(parse(["Paris is ", "sunny."])).toMatchObject({ content: "Paris is sunny.", reasoning: "", toolCalls: [] });
  });
});
