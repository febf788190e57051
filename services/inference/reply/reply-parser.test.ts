import { describe, expect, it } from "vitest";
import fc from "fast-check";
import type { ReplyDelta, ToolCallPiece } from "../core/model-engine.js";
import { createReplyParser, newToolCallId, type ReplyParserOptions } from "./reply-parser.js";
import { splitAt } from "../../../test/helpers/text-chunks.js";

interface MergedCall {
  index: number;
  id: string | undefined;
  name: string | undefined;
  arguments: string;
}

interface Parsed {
  content: string;
  reasoning: string;
  toolCalls: MergedCall[];
  sawToolCall: boolean;
  deltas: ReplyDelta[];
}

function counterIds(): () => string {
  let n = 0;
  return () => `call_${++n}`;
}

function mergeCalls(pieces: ToolCallPiece[]): MergedCall[] {
  const byIndex = new Map<number, MergedCall>();
  for (const piece of pieces) {
    const call = byIndex.get(piece.index);
    if (call === undefined) {
      byIndex.set(piece.index, { index: piece.index, id: piece.id, name: piece.name, arguments: piece.arguments });
    } else {
      call.id ??= piece.id;
      call.name ??= piece.name;
      call.arguments += piece.arguments;
    }
  }
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

function parse(chunks: string[], options: Partial<ReplyParserOptions> = {}): Parsed {
  const parser = createReplyParser({
    thinking: false,
    jsonMode: false,
    newToolCallId: counterIds(),
    ...options,
  });
  const deltas = chunks.map((chunk) => parser.push(chunk));
  const last = parser.finish();
  deltas.push(last);
  return {
    content: deltas.map((d) => d.content).join(""),
    reasoning: deltas.map((d) => d.reasoning).join(""),
    toolCalls: mergeCalls(deltas.flatMap((d) => d.toolCalls)),
    sawToolCall: last.sawToolCall,
    deltas,
  };
}

describe("reply parser: plain text", () => {
  it("passes text through and trims the whitespace around the reply", () => {
    const out = parse(["\n  Hello,", " world!  \n"]);
    expect(out.content).toBe("Hello, world!");
    expect(out.reasoning).toBe("");
    expect(out.toolCalls).toEqual([]);
    expect(out.sawToolCall).toBe(false);
  });

  it("keeps whitespace inside the reply", () => {
    expect(parse(["a \n", "\n b"]).content).toBe("a \n\n b");
  });

  it("holds back only what might be the start of a tag", () => {
    const parser = createReplyParser({ thinking: false, jsonMode: false });
    expect(parser.push("1 < 2 and x<").content).toBe("1 < 2 and x");
    expect(parser.push("b>bold").content).toBe("<b>bold");
    expect(parser.push(" <tool_c").content).toBe("");
    expect(parser.push("ar>").content).toBe(" <tool_car>");
    expect(parser.finish().content).toBe("");
  });

  it("returns a partial tag left at the end as text", () => {
    expect(parse(["see <tool_ca"]).content).toBe("see <tool_ca");
    expect(parse(["see </thi"]).content).toBe("see </thi");
  });

  it("refuses to be used after finish", () => {
    const parser = createReplyParser({ thinking: false, jsonMode: false });
    parser.finish();
    expect(() => parser.push("x")).toThrow(/after finish/);
    expect(() => parser.finish()).toThrow(/twice/);
  });
});

describe("reply parser: thinking", () => {
  it("sends the text up to </think> to reasoning, trimmed, and the rest to content", () => {
    const out = parse(["\nThe user greets me.\nI greet back.\n", "</think>\n\nHello there."], {
      thinking: true,
    });
    expect(out.reasoning).toBe("The user greets me.\nI greet back.");
    expect(out.content).toBe("Hello there.");
  });

  it("streams reasoning before the answer starts", () => {
    const parser = createReplyParser({ thinking: true, jsonMode: false });
    const first = parser.push("Let me think");
    expect(first).toEqual({ content: "", reasoning: "Let me think", toolCalls: [] });
    const second = parser.push(" more.</thi");
    expect(second).toEqual({ content: "", reasoning: " more.", toolCalls: [] });
    const third = parser.push("nk>Done");
    expect(third).toEqual({ content: "Done", reasoning: "", toolCalls: [] });
  });

  it("keeps a reply that never closes its thinking out of content", () => {
    const out = parse(["still thinking about it ", "and more"], { thinking: true });
    expect(out.reasoning).toBe("still thinking about it and more");
    expect(out.content).toBe("");
  });

  it("with thinking off, a <think> span the model writes anyway is still reasoning", () => {
    const out = parse(["Hi <think>hidden</think> there"]);
    expect(out.reasoning).toBe("hidden");
    expect(out.content).toBe("Hi  there");
  });

  it("drops stray thinking tags instead of showing them", () => {
    expect(parse(["a</think>b"]).content).toBe("ab");
    expect(parse(["x<think>y</think>z</think>w"], { thinking: true })).toMatchObject({
      reasoning: "xy",
      content: "zw",
    });
  });

  it("separates a second thinking span from the first", () => {
    expect(parse(["x </think>z<think> y</think>w"], { thinking: true })).toMatchObject({
      reasoning: "x\n\ny",
      content: "zw",
    });
  });

  it("reads tool calls after the thinking span, never inside it", () => {
    const out = parse(
      ['maybe <tool_call>{"name":"a","arguments":{}}</tool_call></think><tool_call>{"name":"b","arguments":{"x":1}}</tool_call>'],
      { thinking: true },
    );
    expect(out.reasoning).toBe('maybe <tool_call>{"name":"a","arguments":{}}</tool_call>');
    expect(out.toolCalls).toEqual([{ index: 0, id: "call_1", name: "b", arguments: '{"x":1}' }]);
  });
});

describe("reply parser: tool calls", () => {
  it("turns a call span into a tool call with arguments as a JSON string", () => {
    const out = parse([
      "Let me check.\n<tool_call>",
      '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}',
      "</tool_call>",
    ]);
    expect(out.content).toBe("Let me check.");
    expect(out.toolCalls).toEqual([{ index: 0, id: "call_1", name: "get_weather", arguments: '{"city":"Paris","unit":"c"}' }]);
    expect(out.sawToolCall).toBe(true);
  });

  it("numbers several calls in order", () => {
    const out = parse([
      '<tool_call>{"name": "a", "arguments": {"n": 1}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>',
    ]);
    expect(out.toolCalls.map((c) => [c.index, c.name, c.arguments])).toEqual([
      [0, "a", '{"n":1}'],
      [1, "b", "{}"],
    ]);
    expect(out.content).toBe("");
  });

  it("gives ids of the form call_ + 24 random alphanumerics", () => {
    const parser = createReplyParser({ thinking: false, jsonMode: false });
    const delta = parser.push('<tool_call>{"name":"f","arguments":{}}</tool_call>');
    expect(delta.toolCalls[0]?.id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    const ids = new Set(Array.from({ length: 100 }, () => newToolCallId()));
    expect(ids.size).toBe(100);
  });

  it("accepts arguments sent as a JSON string, missing arguments and `parameters`", () => {
    const out = parse([
      '<tool_call>{"name":"a","arguments":"{\\"q\\": \\"x\\"}"}</tool_call>',
      '<tool_call>{"name":"b"}</tool_call>',
      '<tool_call>{"name":"c","parameters":{"k":[1,2]}}</tool_call>',
    ]);
    expect(out.toolCalls.map((c) => c.arguments)).toEqual(['{"q":"x"}', "{}", '{"k":[1,2]}']);
  });

  it("leaves a malformed call's text as content", () => {
    const bad = [
      "<tool_call>not json</tool_call>",
      '<tool_call>{"arguments":{}}</tool_call>',
      '<tool_call>{"name":"f","arguments":[1]}</tool_call>',
      '<tool_call>{"name":"f","arguments":"nope"}</tool_call>',
      '<tool_call>["f"]</tool_call>',
    ];
    for (const text of bad) {
      const out = parse([`ok ${text} end`]);
      expect(out.content).toBe(`ok ${text} end`);
      expect(out.toolCalls).toEqual([]);
      expect(out.sawToolCall).toBe(false);
    }
  });

  it("a call the reply ended in (max_tokens) is a call when its name is complete, never markup in content", () => {
    expect(parse(['<tool_call>{"name":"f","arguments":{"a":1}}']).toolCalls).toHaveLength(1);
    const cut = parse(['ok <tool_call>{"name": "get_weather", "arguments": {"city": "Mad']);
    expect(cut.toolCalls).toEqual([{ index: 0, id: "call_1", name: "get_weather", arguments: '{"city": "Mad' }]);
    expect(cut.content).toBe("ok");
    expect(cut.sawToolCall).toBe(true);
    const beforeArguments = parse(['<tool_call>{"name": "get_weather", "arguments":']);
    expect(beforeArguments.toolCalls).toEqual([{ index: 0, id: "call_1", name: "get_weather", arguments: "" }]);
    const beforeName = parse(['<tool_call>{"name": "get_w']);
    expect(beforeName.toolCalls).toEqual([]);
    expect(beforeName.content).toBe("");
  });

  it("settles an unclosed call when the next one opens", () => {
    const out = parse(['<tool_call>{"name":"a","arguments":{}}<tool_call>{"name":"b","arguments":{}}</tool_call>']);
    expect(out.toolCalls.map((c) => c.name)).toEqual(["a", "b"]);
  });

  it("leaves call spans as content when tool calls are off (tool_choice none)", () => {
    const text = '<tool_call>{"name":"a","arguments":{}}</tool_call>';
    const out = parse([text], { toolCalls: false });
    expect(out.content).toBe(text);
    expect(out.sawToolCall).toBe(false);
  });

  it("does not treat a tag inside the arguments' strings specially beyond the close tag", () => {
    const out = parse(['<tool_call>{"name":"echo","arguments":{"s":"<b>{}</b>"}}</tool_call>']);
    expect(out.toolCalls[0]?.arguments).toBe('{"s":"<b>{}</b>"}');
  });
});

describe("reply parser: forced tool", () => {
  const forced = { forcedTool: "get_weather" };

  it("reads the reply as the arguments of the forced call", () => {
    const out = parse(['{"city": "Paris"}', "}</tool_call>"], forced);
    expect(out.toolCalls).toEqual([{ index: 0, id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }]);
    expect(out.content).toBe("");
    expect(out.sawToolCall).toBe(true);
  });

  it("sends the call's id and name with the first delta, the arguments when complete", () => {
    const parser = createReplyParser({ thinking: false, jsonMode: false, forcedTool: "f" });
    const first = parser.push('{"a": ');
    expect(first.toolCalls).toEqual([{ index: 0, id: expect.stringMatching(/^call_/), name: "f", arguments: "" }]);
    const second = parser.push('"b\\"}"}');
    expect(second.toolCalls).toEqual([{ index: 0, arguments: '{"a":"b\\"}"}' }]);
    expect(parser.push("}</tool_call>")).toEqual({ content: "", reasoning: "", toolCalls: [] });
    expect(parser.finish()).toMatchObject({ toolCalls: [], sawToolCall: true });
  });

  it("is always a call of the forced function, whatever the model wrote", () => {
    const cases: [string[], string][] = [
      [[], "{}"],
      [["  "], "{}"],
      [["garbage}</tool_call>"], "garbage"],
      [['{"a": 1'], '{"a": 1'],
      [['{"a": 1</tool_call>after'], '{"a": 1'],
      [["[1, 2]}</tool_call>"], "[1, 2]"],
    ];
    for (const [chunks, args] of cases) {
      const out = parse(chunks, forced);
      expect(out.toolCalls).toEqual([{ index: 0, id: "call_1", name: "get_weather", arguments: args }]);
      expect(out.sawToolCall).toBe(true);
    }
  });

  it("parses what follows the forced call as an ordinary reply", () => {
    const out = parse(['{"city":"Oslo"}}</tool_call>\n<tool_call>{"name":"get_time","arguments":{"tz":"CET"}}</tool_call> bye'], forced);
    expect(out.toolCalls.map((c) => [c.index, c.name, c.arguments])).toEqual([
      [0, "get_weather", '{"city":"Oslo"}'],
      [1, "get_time", '{"tz":"CET"}'],
    ]);
    expect(out.content).toBe("bye");
  });

  it("takes text after an unclosed forced call as content", () => {
    const out = parse(['{"city":"Oslo"}} It is sunny.'], forced);
    expect(out.toolCalls[0]?.arguments).toBe('{"city":"Oslo"}');
    expect(out.content).toBe("It is sunny.");
  });

  it("ignores thinking when the call is forced (the template skips <think> then)", () => {
    const out = parse(['{"x": true}}</tool_call>'], { ...forced, thinking: true });
    expect(out.reasoning).toBe("");
    expect(out.toolCalls[0]?.arguments).toBe('{"x":true}');
  });
});

describe("reply parser: JSON mode", () => {
  const json = { jsonMode: true };

  it("returns the first complete JSON object, skipping text around it", () => {
    const out = parse(['Sure, here: {"a": "}{", "b": [1, {"c": 2}]} and also {"x": 1}'], json);
    expect(out.content).toBe('{"a": "}{", "b": [1, {"c": 2}]}');
  });

  it("respects escapes inside strings", () => {
    const out = parse(['{"q": "say \\"}\\" and \\\\", "n": 1} tail'], json);
    expect(out.content).toBe('{"q": "say \\"}\\" and \\\\", "n": 1}');
    expect(JSON.parse(out.content)).toEqual({ q: 'say "}" and \\', n: 1 });
  });

  it("streams the object as it comes", () => {
    const parser = createReplyParser({ thinking: false, jsonMode: true });
    expect(parser.push("ok {").content).toBe("{");
    expect(parser.push('"a":').content).toBe('"a":');
    expect(parser.push("1} x").content).toBe("1}");
    expect(parser.finish().content).toBe("");
  });

  it("returns what there is when no object completes", () => {
    expect(parse(['text {"a": [1, '], json).content).toBe('{"a": [1,');
    expect(parse(["no json at all "], json).content).toBe("no json at all");
  });

  it("keeps reasoning and tool calls apart from the JSON content", () => {
    const out = parse(['plan</think>{"k": "v"}<tool_call>{"name":"f","arguments":{}}</tool_call>'], { ...json, thinking: true });
    expect(out.reasoning).toBe("plan");
    expect(out.content).toBe('{"k": "v"}');
    expect(out.toolCalls).toHaveLength(1);
  });
});

describe("reply parser: any split gives the same result", () => {
  const fragments = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    '{"name": "f", "arguments": {"a": "x"}}',
    '{"name": "g"}',
    '{"k": [1, {"s": "}\\""}]}',
    "{",
    "}",
    '"',
    "\\",
    "<",
    "</",
    "<b>",
    " ",
    "\n",
    "hello",
    "é漢字",
    "😀",
  ];
  const replies = fc.array(fc.constantFrom(...fragments), { maxLength: 30 }).map((parts) => parts.join(""));
  const optionSets = fc.record({
    thinking: fc.boolean(),
    jsonMode: fc.boolean(),
    forcedTool: fc.option(fc.constantFrom("f", "get_weather"), { nil: undefined }),
    toolCalls: fc.boolean(),
  });

  it("for thinking, tool calls, forced tools and JSON mode", () => {
    fc.assert(
      fc.property(replies, fc.array(fc.nat(), { maxLength: 12 }), optionSets, (text, cuts, options) => {
        const whole = parse([text], options);
        const split = parse(splitAt(text, cuts), options);
        expect(split.content).toBe(whole.content);
        expect(split.reasoning).toBe(whole.reasoning);
        expect(split.toolCalls).toEqual(whole.toolCalls);
        expect(split.sawToolCall).toBe(whole.sawToolCall);
      }),
      { numRuns: 3000 },
    );
  });

  it("one character at a time", () => {
    fc.assert(
      fc.property(replies, optionSets, (text, options) => {
        const whole = parse([text], options);
        const chars = parse(Array.from(text), options);
        expect(chars.content).toBe(whole.content);
        expect(chars.reasoning).toBe(whole.reasoning);
        expect(chars.toolCalls).toEqual(whole.toolCalls);
      }),
      { numRuns: 500 },
    );
  });

  it("never lets a thinking tag into content and never loses a forced call", () => {
    fc.assert(
      fc.property(replies, fc.array(fc.nat(), { maxLength: 8 }), optionSets, (text, cuts, options) => {
        const out = parse(splitAt(text, cuts), options);
        expect(out.content).not.toContain("<think>");
        expect(out.content).not.toContain("</think>");
        if (options.forcedTool !== undefined) {
          expect(out.toolCalls[0]).toMatchObject({ index: 0, name: options.forcedTool });
          expect(out.sawToolCall).toBe(true);
        }
        for (const call of out.toolCalls) {
          expect(call.id).toBeDefined();
          expect(typeof call.arguments).toBe("string");
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("the model's own delimiters (config special_tokens)", () => {
  const tags = { toolCall: ["<|tool_call_begin|>", "<|tool_call_end|>"], thinking: ["<|think|>", "<|/think|>"] } as {
    toolCall: [string, string];
    thinking: [string, string];
  };
  const reply = 'mulling<|/think|>Sure.<|tool_call_begin|>{"name": "f", "arguments": {"a": 1}}<|tool_call_end|>';

  it("splits thinking and extracts calls written with them, however the text is cut", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 6 }), (cuts) => {
        const r = parse(splitAt(reply, cuts), { thinking: true, tags });
        expect(r.reasoning).toBe("mulling");
        expect(r.content).toBe("Sure.");
        expect(r.toolCalls).toEqual([{ index: 0, id: "call_1", name: "f", arguments: '{"a":1}' }]);
      }),
      { numRuns: 300 },
    );
  });

  it("leaves the default spelling as text for a model that names other delimiters", () => {
    const r = parse(['<tool_call>{"name": "f", "arguments": {}}</tool_call>'], { tags });
    expect(r.toolCalls).toEqual([]);
    expect(r.content).toBe('<tool_call>{"name": "f", "arguments": {}}</tool_call>');
  });
});
