// The legacy completions request schema and the text_completion mapping, without a server:
// what is accepted, ignored and refused (with `param`), and how Generate events become the
// completion, its chunks and OpenAI's legacy logprobs (echo, offsets, alternatives).
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { FinishReason, GenerateResponseSchema, type GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import { IGNORED_COMPLETION_FIELDS, MAX_PROMPT_CHARS } from "../schemas/completion-request.js";
import { TextCompletionChunkSchema, TextCompletionSchema } from "../schemas/completion-response.js";
import {
  createTextChunker,
  createTextCompletionMeta,
  parseCompletionRequest,
  textCompletionFromEvents,
  type TextCompletionMeta,
} from "./completion.js";

const utf8 = (text: string) => new TextEncoder().encode(text);
const started = (promptTokens: number, tokenizedPrompt: string[] = []): GenerateResponse =>
  create(GenerateResponseSchema, {
    event: {
      case: "started",
      value: {
        model: "textmodel-26b",
        promptTokens,
        workerId: "w1",
        tokenizedPrompt: tokenizedPrompt.map((t) => ({ token: t, bytes: utf8(t) })),
      },
    },
  });
type Entry = { token: string; logprob: number; bytes?: Uint8Array; top?: [string, number][] };
const delta = (content: string, entries: Entry[] = []): GenerateResponse =>
  create(GenerateResponseSchema, {
    event: {
      case: "delta",
      value: {
        content,
        logprobs: entries.map((e) => ({
          token: e.token,
          logprob: e.logprob,
          bytes: e.bytes ?? utf8(e.token),
          topLogprobs: (e.top ?? []).map(([token, logprob]) => ({ token, logprob, bytes: utf8(token) })),
        })),
      },
    },
  });
const finished = (reason: FinishReason, promptTokens: number, completionTokens: number): GenerateResponse =>
  create(GenerateResponseSchema, {
    event: {
      case: "finished",
      value: { finishReason: reason, usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens } },
    },
  });

const meta = (init: Partial<TextCompletionMeta> = {}) =>
  createTextCompletionMeta({
    model: "textmodel-26b",
    prompt: "Once",
    echo: false,
    logprobs: undefined,
    id: "cmpl-test",
    created: 1,
    ...init,
  });

const refusal = (body: Record<string, unknown>) => {
  const parsed = parseCompletionRequest({ model: "textmodel-26b", prompt: "hi", ...body });
  if (parsed.ok) throw new Error("expected a refusal");
  return parsed.error;
};

describe("parseCompletionRequest", () => {
  it("maps the request to a raw-prompt Generate request; max_tokens defaults to 16", () => {
    const parsed = parseCompletionRequest({ model: "textmodel-26b", prompt: "Once upon", stop: "\n" });
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.request.rawPrompt).toBe("Once upon");
    expect(parsed.request.messages).toEqual([]);
    expect(parsed.request.options).toMatchObject({ maxTokens: 16, stop: ["\n"], logprobs: false, includeTokenizedPrompt: false });
    expect(parsed).toMatchObject({ prompt: "Once upon", stream: false, includeUsage: false, echo: false, logprobs: undefined });
  });

  it("takes an array of one string, logprobs as alternatives, echo, stream options; caps max_tokens", () => {
    const parsed = parseCompletionRequest({
      model: "m",
      prompt: ["Once"],
      logprobs: 2,
      echo: true,
      max_tokens: 100_000,
      stream: true,
      stream_options: { include_usage: true },
      stop: ["a", "b"],
    });
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.request.rawPrompt).toBe("Once");
    expect(parsed.request.options).toMatchObject({
      maxTokens: 8192,
      stop: ["a", "b"],
      logprobs: true,
      topLogprobs: 2,
      includeTokenizedPrompt: true,
    });
    expect(parsed).toMatchObject({ stream: true, includeUsage: true, echo: true, logprobs: 2 });
    const zero = parseCompletionRequest({ model: "m", prompt: "x", logprobs: 0 });
    expect(zero.ok && zero.request.options).toMatchObject({ logprobs: true, topLogprobs: 0 });
  });

  it("accepts and ignores the sampling fields, n = 1, best_of = 1 and an empty suffix", () => {
    const ignored = Object.fromEntries(IGNORED_COMPLETION_FIELDS.map((name) => [name, { any: "value" }]));
    const parsed = parseCompletionRequest({ model: "m", prompt: "x", n: 1, best_of: 1, suffix: "", ...ignored });
    expect(parsed.ok).toBe(true);
  });

  it("refuses what it cannot do, naming the field", () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ suffix: "end" }, "suffix", /suffix.*not supported/],
      [{ n: 2 }, "n", /only one choice/],
      [{ best_of: 3 }, "best_of", /only one candidate/],
      [{ prompt: ["a", "b"] }, "prompt", /only one prompt per request/],
      [{ prompt: [1, 2, 3] }, "prompt", /token-id prompts are not supported/],
      [{ prompt: [[1, 2]] }, "prompt", /token-id prompts are not supported/],
      [{ prompt: [] }, "prompt", /empty array/],
      [{ prompt: "" }, "prompt", /must not be empty/],
      [{ prompt: 7 }, "prompt", /expected a string or an array of one string, but got an integer/],
      [{ prompt: "x".repeat(MAX_PROMPT_CHARS + 1) }, "prompt", /string too long/],
      [{ prompt: undefined }, "prompt", /Missing required parameter: 'prompt'/],
      [{ logprobs: 6 }, "logprobs", /from 0 to 5/],
      [{ logprobs: true }, "logprobs", /expected an integer/],
      [{ max_tokens: 0 }, "max_tokens", /positive integer/],
      [{ stop: ["a", "b", "c", "d", "e"] }, "stop", /at most 4/],
      [{ model: " " }, "model", /must not be empty/],
    ];
    for (const [body, param, message] of cases) {
      const error = refusal(body);
      expect(error.param, JSON.stringify(body).slice(0, 80)).toBe(param);
      expect(error.message).toMatch(message);
    }
  });
});

describe("textCompletionFromEvents", () => {
  it("builds the text_completion object: raw text, finish reason, usage", () => {
    const completion = textCompletionFromEvents(
      [started(3), delta(" upon"), delta(" a time"), finished(FinishReason.LENGTH, 3, 3)],
      meta(),
    );
    expect(TextCompletionSchema.parse(completion)).toEqual({
      id: "cmpl-test",
      object: "text_completion",
      created: 1,
      model: "textmodel-26b",
      choices: [{ text: " upon a time", index: 0, logprobs: null, finish_reason: "length" }],
      usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
    });
    const stopped = textCompletionFromEvents([started(3), finished(FinishReason.STOP, 3, 0)], meta());
    expect(stopped.choices[0]).toMatchObject({ text: "", finish_reason: "stop" });
  });

  it("echo puts the prompt before the reply", () => {
    const completion = textCompletionFromEvents([started(1), delta(" upon"), finished(FinishReason.STOP, 1, 1)], meta({ echo: true }));
    expect(completion.choices[0]!.text).toBe("Once upon");
  });

  it("logprobs: tokens, their logprob, alternatives with the token itself, offsets into the text", () => {
    const completion = textCompletionFromEvents(
      [
        started(1),
        delta(" up", [
          {
            token: " up",
            logprob: -0.5,
            top: [
              [" up", -0.5],
              [" at", -1.5],
            ],
          },
        ]),
        delta("on", [{ token: "on", logprob: -2, top: [["in", -1]] }]),
        finished(FinishReason.LENGTH, 1, 2),
      ],
      meta({ logprobs: 2 }),
    );
    expect(TextCompletionSchema.parse(completion).choices[0]!.logprobs).toEqual({
      tokens: [" up", "on"],
      token_logprobs: [-0.5, -2],
      top_logprobs: [
        { " up": -0.5, " at": -1.5 },
        { in: -1, on: -2 },
      ],
      text_offset: [0, 3],
    });
  });

  it("echo with logprobs: the prompt's tokens first, unscored (null), offsets continuing after the prompt", () => {
    const completion = textCompletionFromEvents(
      [started(2, ["On", "ce"]), delta(" é", [{ token: " é", logprob: -1 }]), finished(FinishReason.LENGTH, 2, 1)],
      meta({ echo: true, logprobs: 0 }),
    );
    expect(completion.choices[0]!.text).toBe("Once é");
    expect(completion.choices[0]!.logprobs).toEqual({
      tokens: ["On", "ce", " é"],
      token_logprobs: [null, null, -1],
      top_logprobs: [null, null, { " é": -1 }],
      text_offset: [0, 2, 4],
    });
  });

  it("a character split across tokens counts at its first part; offsets are in code points", () => {
    const [a, b] = [utf8("é").subarray(0, 1), utf8("é").subarray(1)];
    const completion = textCompletionFromEvents(
      [
        started(1),
        delta("xé!", [
          { token: "x", logprob: -1 },
          { token: "\uFFFD", logprob: -1, bytes: a },
          { token: "\uFFFD", logprob: -1, bytes: b },
          { token: "!", logprob: -1 },
        ]),
        finished(FinishReason.LENGTH, 1, 4),
      ],
      meta({ logprobs: 0 }),
    );
    expect(completion.choices[0]!.logprobs!.text_offset).toEqual([0, 1, 2, 2]);
  });
});

describe("createTextChunker", () => {
  const events = [started(2, ["On", "ce"]), delta(" up", [{ token: " up", logprob: -1 }]), delta(""), finished(FinishReason.STOP, 2, 1)];
  const run = (m: TextCompletionMeta, includeUsage: boolean) => {
    const chunker = createTextChunker(m, { includeUsage });
    const chunks = events.flatMap((e) => chunker.fromEvent(e)).map((c) => TextCompletionChunkSchema.parse(c));
    return { chunks, chunker };
  };

  it("a chunk per delta, then the finish reason carrying usage; every chunk has a choice", () => {
    const { chunks, chunker } = run(meta(), false);
    expect(chunks.map((c) => c.choices[0]?.text)).toEqual([" up", ""]);
    expect(chunks.at(-1)).toMatchObject({
      choices: [{ finish_reason: "stop" }],
      usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 },
    });
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined && c.choices[0]!.finish_reason === null)).toBe(true);
    expect(chunker.usage).toEqual({ promptTokens: 2, completionTokens: 1 });
    expect(chunker.deltasSent).toBe(1);
  });

  it("with include_usage: one more chunk, choices empty, with usage", () => {
    const { chunks } = run(meta(), true);
    expect(chunks.at(-2)).toMatchObject({ choices: [{ finish_reason: "stop" }] });
    expect(chunks.at(-2)!.usage).toBeUndefined();
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: 3 } });
  });

  it("echo: the prompt first (with its unscored tokens when logprobs are asked), then the streamed logprobs", () => {
    const { chunks } = run(meta({ echo: true, logprobs: 1 }), false);
    expect(chunks[0]!.choices[0]).toMatchObject({
      text: "Once",
      logprobs: { tokens: ["On", "ce"], token_logprobs: [null, null], top_logprobs: [null, null], text_offset: [0, 2] },
    });
    expect(chunks[1]!.choices[0]!.logprobs).toEqual({
      tokens: [" up"],
      token_logprobs: [-1],
      top_logprobs: [{ " up": -1 }],
      text_offset: [4],
    });
    const plain = run(meta({ echo: true }), false).chunks;
    expect(plain[0]!.choices[0]).toMatchObject({ text: "Once", logprobs: null });
  });
});
