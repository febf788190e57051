// Generate with `raw_prompt` (the legacy completions) on the tiny model through the in-memory
// router transport: the prompt is the text tokenized as it is (no chat template), the reply is
// the raw text, and what needs a template is refused.
import { Code, type Client } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FinishReason,
  type InferenceService,
  ResponseFormatType,
  Role,
  type GenerateRequestSchema,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { collectGeneration, connectFailure as failure, startTinyInference } from "../../../test/helpers/inference-service.js";
import type { ForwardRunner } from "../decoder/forward.js";
import type { ModelPool } from "../engine/model-pool.js";
import { createRawReplyParser } from "../reply/reply-parser.js";

const MODEL = "textmodel-26b";
let pool: ModelPool;
let client: Client<typeof InferenceService>;
/** The input ids of every forward's first row, in order. */
let rows: bigint[][] = [];

beforeAll(async () => {
  ({ pool, client } = await startTinyInference({
    servingIds: [MODEL],
    slots: 1,
    queue: 4,
    wrapRunner: (inner): ForwardRunner => ({
      run: (inputs, fetch) => {
        rows.push([...inputs.inputIds.subarray(0, inputs.seq)]);
        return inner.run(inputs, fetch);
      },
    }),
  }));
});

afterAll(async () => {
  await pool?.close();
});

const collect = (req: MessageInitShape<typeof GenerateRequestSchema>) => collectGeneration(client, req);

const tokenizer = () => pool.runtime(MODEL)!.model.tokenizer;
const utf8 = (chunks: Uint8Array[]) => Buffer.concat(chunks).toString("utf8");

describe("Generate with raw_prompt", () => {
  it("tokenizes the prompt as it is: no chat template, nothing added", async () => {
    const raw = "Once upon a time, a dog named Rex";
    const ids = tokenizer().encode(raw);
    rows = [];
    const r = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 8 } });
    expect(r.started.promptTokens).toBe(ids.length);
    expect(r.finished.usage).toMatchObject({ promptTokens: ids.length, totalTokens: ids.length + r.finished.usage!.completionTokens });
    // The prompt is shorter than a block: the first forward's row is its tokens, then the masked block.
    const maskId = BigInt(pool.runtime(MODEL)!.decode.maskTokenId);
    expect(rows[0]!.slice(0, ids.length)).toEqual(ids.map(BigInt));
    expect(rows[0]![ids.length]).toBe(maskId);

    // The same text as a chat message is rendered by the template: more tokens, other ones.
    const chat = await collect({
      model: MODEL,
      messages: [{ role: Role.USER, content: [{ part: { case: "text", value: raw } }] }],
      options: { maxTokens: 8 },
    });
    expect(chat.started.promptTokens).toBeGreaterThan(ids.length);
  });

  it("CountTokens of a raw prompt counts what Generate runs on, with the same checks", async () => {
    const raw = "The lighthouse keeper counted the ships.";
    const { tokens } = await client.countTokens({ model: MODEL, rawPrompt: raw });
    expect(tokens).toBe(tokenizer().encode(raw).length);
    const r = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 1 } });
    expect(r.started.promptTokens).toBe(tokens);
    const bytesBound = pool.runtime(MODEL)!.model.maxTokenBytes * pool.runtime(MODEL)!.decode.maxPositions;
    const tooLong = await failure(() => client.countTokens({ model: MODEL, rawPrompt: "x".repeat(bytesBound) }));
    expect(tooLong.code).toBe(Code.InvalidArgument);
    expect(tooLong.rawMessage).toMatch(/^prompt too long: the prompt has \d+ bytes of text/);
    const empty = await failure(() => client.countTokens({ model: MODEL, rawPrompt: "" }));
    expect(empty.rawMessage).toBe("raw_prompt: must not be empty");
  });

  it("lists the prompt's tokens only when asked, their bytes spelling the prompt", async () => {
    const raw = "Tessera turns noise into text: ünïcödé and all.";
    const plain = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 2 } });
    expect(plain.started.tokenizedPrompt).toEqual([]);
    const listed = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 2, includeTokenizedPrompt: true } });
    const tokens = listed.started.tokenizedPrompt;
    expect(tokens).toHaveLength(listed.started.promptTokens);
    expect(utf8(tokens.map((t) => t.bytes))).toBe(raw);
    expect(tokens.map((t) => t.token)).toEqual(
      tokenizer()
        .encode(raw)
        .map((id) => tokenizer().decode([id])),
    );
  });

  it("returns the raw reply: all content, no reasoning, logprob bytes spelling it exactly", async () => {
    const r = await collect({
      model: MODEL,
      rawPrompt: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n",
      options: { maxTokens: 40, logprobs: true },
    });
    expect(r.reasoning).toBe("");
    expect(r.deltas.every((d) => d.toolCalls.length === 0)).toBe(true);
    const entries = r.deltas.flatMap((d) => d.logprobs);
    expect(entries).toHaveLength(r.finished.usage!.completionTokens);
    expect(utf8(entries.map((e) => e.bytes))).toBe(r.content);
  });

  it("applies max_tokens and stop sequences as for chat", async () => {
    const raw = "Tell me a story about a dog named Rex who lived in Paris.";
    const short = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 5 } });
    expect(short.finished).toMatchObject({ finishReason: FinishReason.LENGTH, usage: { completionTokens: 5 } });
    const full = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 60 } });
    expect(full.content.length).toBeGreaterThan(13);
    const stop = full.content.slice(10, 13);
    const cut = await collect({ model: MODEL, rawPrompt: raw, options: { maxTokens: 60, stop: [stop] } });
    expect(cut.finished.finishReason).toBe(FinishReason.STOP);
    expect(cut.content).toBe(full.content.slice(0, full.content.indexOf(stop)));
  });

  it("refuses what needs a chat template, an empty prompt and a prompt longer than the context", async () => {
    const refused = [
      { rawPrompt: "" },
      { rawPrompt: "hi", messages: [{ role: Role.USER, content: [{ part: { case: "text" as const, value: "hi" } }] }] },
      { rawPrompt: "hi", tools: [{ name: "f" }] },
      { rawPrompt: "hi", options: { responseFormat: { type: ResponseFormatType.JSON_OBJECT } } },
      { rawPrompt: "hi", options: { toolChoice: { choice: { case: "functionName" as const, value: "f" } } } },
      { rawPrompt: "hi", options: { enableThinking: true } },
    ];
    for (const req of refused) {
      const err = await failure(() => collect({ model: MODEL, ...req }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/^raw_prompt: /);
    }
    // Past the context by bytes alone (refused before tokenizing), and by tokens.
    const context = pool.runtime(MODEL)!.decode.maxPositions;
    const bytesBound = pool.runtime(MODEL)!.model.maxTokenBytes * context;
    const tooLong = [
      { raw: "x".repeat(bytesBound), message: /^prompt too long: the prompt has \d+ bytes of text/ },
      { raw: "lorem ipsum dolor ".repeat(800), message: /^prompt too long: \d+ tokens, the context of model "textmodel-26b"/ },
    ];
    for (const { raw, message } of tooLong) {
      const err = await failure(() => collect({ model: MODEL, rawPrompt: raw }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(message);
    }
  });
});

describe("the raw reply parser", () => {
  it("passes text through untouched: tags, tool-call markup and whitespace stay content", () => {
    const parser = createRawReplyParser();
    const text = '  <think>\nhmm</think>\n<tool_call>{"name": "f", "arguments": {}}</tool_call>  ';
    const pieces = [text.slice(0, 5), text.slice(5, 30), text.slice(30)].map((piece) => parser.push(piece));
    expect(pieces.map((p) => p.content).join("")).toBe(text);
    expect(pieces.every((p) => p.reasoning === "" && p.toolCalls.length === 0)).toBe(true);
    expect(parser.finish()).toEqual({ content: "", reasoning: "", toolCalls: [], sawToolCall: false });
  });
});
