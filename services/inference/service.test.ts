// The InferenceService RPCs on the tiny model, through the in-memory router transport and
// over real gRPC: the Generate event stream, request checks, overload, Score against a full
// recomputation (single- and multi-token labels), CountTokens, GetModelInfo.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  FinishReason,
  InferenceService,
  OverloadedSchema,
  ResponseFormatType,
  Role,
  type ChatMessageSchema,
  type GenerateRequestSchema,
} from "../../gen/tessera/inference/v1/inference_pb.js";
import type { ForwardOutputs } from "./decoder/forward.js";
import type { ModelPool } from "./engine/model-pool.js";
import { collectGeneration, connectFailure as failure, startTinyInference } from "../../test/helpers/inference-service.js";
import { inferenceRoutes } from "./server.js";
import { fullForward, recordingRunner, type RecordedForward } from "../../test/helpers/inference-engine.js";

type MessageInit = MessageInitShape<typeof ChatMessageSchema>;

let pool: ModelPool;
let client: Client<typeof InferenceService>;
let forwards: RecordedForward[] = [];

beforeAll(async () => {
  ({ pool, client } = await startTinyInference({
    servingIds: ["textmodel-26b", "decisionmodel-0.1"],
    wrapRunner: (inner) => {
      const r = recordingRunner(inner);
      forwards = r.forwards;
      return r;
    },
  }));
});

afterAll(async () => {
  await pool?.close();
});

const user = (text: string): MessageInit => ({
  role: Role.USER,
  content: [{ part: { case: "text", value: text } }],
});

const collect = (req: MessageInitShape<typeof GenerateRequestSchema>, c = client) => collectGeneration(c, req);

describe("Generate", () => {
  it("streams started, a delta per committed block, then finished with exact usage", async () => {
    const messages = [user("2+2=?")];
    const { tokens } = await client.countTokens({ model: "textmodel-26b", messages });
    const r = await collect({ model: "textmodel-26b", requestId: "r1", messages, options: { maxTokens: 200 } });
    expect(r.events[0]).toEqual({
      case: "started",
      value: expect.objectContaining({ model: "textmodel-26b", promptTokens: tokens, workerId: "worker-1" }),
    });
    expect(r.finished.finishReason).toBe(FinishReason.LENGTH);
    expect(r.finished.usage).toMatchObject({ promptTokens: tokens, completionTokens: 200, totalTokens: tokens + 200 });
    expect(r.finished.forwardPasses).toBeGreaterThan(3);
    const blocks = r.deltas.map((d) => d.blockIndex);
    expect(blocks).toEqual([...blocks].sort((a, b) => a - b));
    expect(new Set(blocks).size).toBeGreaterThanOrEqual(3);
    expect(r.content.length).toBeGreaterThan(0);
  });

  it("max_tokens 5 gives length and 5 completion tokens; the end of turn gives stop", async () => {
    const short = await collect({ model: "textmodel-26b", messages: [user("2+2=?")], options: { maxTokens: 5 } });
    expect(short.finished).toMatchObject({ finishReason: FinishReason.LENGTH, usage: { completionTokens: 5 } });
    const ended = await collect({ model: "textmodel-26b", messages: [user("hi")] });
    expect(ended.finished).toMatchObject({ finishReason: FinishReason.STOP, usage: { completionTokens: 6 } });
  });

  it("a stop sequence ends the reply before it", async () => {
    const full = await collect({ model: "textmodel-26b", messages: [user("Tell me a story about a dog named Rex who lived in Paris.")] });
    const stop = full.content.slice(20, 24);
    const cut = await collect({
      model: "textmodel-26b",
      messages: [user("Tell me a story about a dog named Rex who lived in Paris.")],
      options: { stop: [stop] },
    });
    expect(cut.finished.finishReason).toBe(FinishReason.STOP);
    expect(cut.content).toBe(full.content.slice(0, full.content.indexOf(stop)));
    expect(cut.finished.usage!.completionTokens).toBeLessThan(full.finished.usage!.completionTokens);
  });

  it("a named tool choice makes the reply that call: tool_calls", async () => {
    const r = await collect({
      model: "textmodel-26b",
      messages: [user("What is the weather in Paris?")],
      tools: [{ name: "get_weather", description: "Weather of a city", parameters: { type: "object" } }],
      options: { maxTokens: 300, toolChoice: { choice: { case: "functionName", value: "get_weather" } } },
    });
    expect(r.finished.finishReason).toBe(FinishReason.TOOL_CALLS);
    const calls = r.deltas.flatMap((d) => d.toolCalls);
    expect(calls[0]).toMatchObject({ index: 0, name: "get_weather" });
    expect(calls[0]!.id).not.toBe("");
    expect(r.content).toBe("");
  });

  it("thinking goes to reasoning, never to content; off by default", async () => {
    const on = await collect({ model: "textmodel-26b", messages: [user("hi")], options: { enableThinking: true, maxTokens: 64 } });
    expect(on.reasoning.length).toBeGreaterThan(0);
    expect(on.content).not.toContain("</think>");
    const off = await collect({ model: "textmodel-26b", messages: [user("hi")], options: { maxTokens: 64 } });
    expect(off.reasoning).toBe("");
  });

  it("JSON mode passes through only a JSON object (or nothing)", async () => {
    const r = await collect({
      model: "textmodel-26b",
      messages: [user("Reply in JSON")],
      options: { maxTokens: 64, responseFormat: { type: ResponseFormatType.JSON_OBJECT } },
    });
    if (r.content !== "") expect(r.content.startsWith("{")).toBe(true);
  });

  it("refuses image parts for a model without image support, naming the model", async () => {
    const err = await failure(() =>
      collect({
        model: "textmodel-26b",
        messages: [
          {
            role: Role.USER,
            content: [{ part: { case: "imageUrl", value: { url: "https://example.invalid/cat.png" } } }],
          },
        ],
      }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.message).toContain('"textmodel-26b"');
  });

  it("refuses a prompt longer than the context", async () => {
    const err = await failure(() => collect({ model: "textmodel-26b", messages: [user("lorem ipsum dolor ".repeat(800))] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.message).toContain("too long");
  });

  it("refuses malformed requests and unknown models", async () => {
    expect((await failure(() => collect({ model: "nope", messages: [user("hi")] }))).code).toBe(Code.NotFound);
    expect((await failure(() => collect({ model: "textmodel-26b", messages: [] }))).code).toBe(Code.InvalidArgument);
    expect((await failure(() => collect({ model: "textmodel-26b", messages: [{ content: [] } as MessageInit] }))).code).toBe(
      Code.InvalidArgument,
    );
    const badTool = await failure(() =>
      collect({
        model: "textmodel-26b",
        messages: [user("hi")],
        options: { toolChoice: { choice: { case: "functionName", value: "missing" } } },
      }),
    );
    expect(badTool.code).toBe(Code.InvalidArgument);
    const manyStops = await failure(() =>
      collect({ model: "textmodel-26b", messages: [user("hi")], options: { stop: Array.from({ length: 17 }, (_, i) => `s${i}`) } }),
    );
    expect(manyStops.code).toBe(Code.InvalidArgument);
  });

  it("answers Overloaded when the slots and the queue are full", async () => {
    const streams = [0, 1, 2, 3].map(() =>
      client.generate({ model: "textmodel-26b", messages: [user("2+2=?")], options: { maxTokens: 120 } })[Symbol.asyncIterator](),
    );
    // Two take the slots, two wait in the queue (the two ids share one model).
    const firsts = streams.map((s) => s.next());
    await Promise.all(firsts.slice(0, 2));
    const err = await failure(() => collect({ model: "decisionmodel-0.1", messages: [user("hi")] }));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.findDetails(OverloadedSchema)[0]?.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    for (const s of streams) await s.return?.();
    await Promise.allSettled(firsts);
    await expect.poll(() => pool.slotsFree(), { timeout: 10_000 }).toBe(2);
  });

  it("a client that cancels frees the slot", async () => {
    const abort = new AbortController();
    const stream = client.generate(
      { model: "textmodel-26b", messages: [user("2+2=?")], options: { maxTokens: 250 } },
      { signal: abort.signal },
    );
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    expect(pool.slotsFree()).toBe(1);
    abort.abort();
    await expect(it.next()).rejects.toThrow();
    await expect.poll(() => pool.slotsFree(), { timeout: 5_000 }).toBe(2);
  });
});

describe("Score", () => {
  const model = () => pool.runtime("decisionmodel-0.1")!.model;
  const PREFIX =
    "<|im_start|>system\nAnswer the question about the state below.<|im_end|>\n<|im_start|>user\nState:\nThe invoice is 90 days overdue and the customer has not answered three e-mails about it. The quick brown fox jumps over the lazy dog.\n";
  const SUFFIXES = [
    "\nQuestion: Is this urgent?\nAnswer yes or no.<|im_end|>\n<|im_start|>assistant\n",
    "\nQuestion: Which option fits the state best?\nOptions:\n<|opt_0|> pay\n<|opt_1|> wait\n<|opt_2|> sue\nAnswer with the label of one option.<|im_end|>\n<|im_start|>assistant\n",
    "\nQuestion: Rate it.\n<|im_end|>\n<|im_start|>assistant\n",
  ];
  const LABELS = [
    ["<|yes|>", "<|no|>"],
    ["<|opt_0|>", "<|opt_1|>", "<|opt_2|>"],
    ["<|opt_0|>", "<|opt_1|>"],
  ];

  /** The full prompt with `fill` tokens then `masks` masks, recomputed from position 0. */
  async function slotLogits(text: string, fill: number[], masks: number): Promise<{ out: ForwardOutputs; at: number }> {
    const m = model();
    const ids = [...m.tokenizer.encode(text), ...fill];
    const engine = pool.runtime("decisionmodel-0.1")!;
    const out = await fullForward(m, engine.runner, [...ids, ...new Array<number>(masks).fill(m.config.maskTokenId)]);
    return { out, at: ids.length };
  }

  it("reads the labels' logits at the answer slot, equal to a full recomputation, after one prefill", async () => {
    const m = model();
    expect(m.tokenizer.encode(PREFIX).length).toBeGreaterThan(64);
    const before = forwards.length;
    const res = await client.score({
      model: "decisionmodel-0.1",
      prefix: PREFIX,
      suffixes: SUFFIXES.map((text, i) => ({ text, labels: LABELS[i]! })),
    });
    const runs = forwards.slice(before);
    expect({ batch: runs[0]!.batch, past: runs[0]!.past }).toEqual({ batch: 1, past: 0 }); // the prefix's complete blocks, once
    // Every question a row over that past, rows of similar length sharing a forward (score-plan.ts).
    expect(runs.slice(1).every((f) => f.past === 64 && !f.fetch.present)).toBe(true);
    expect(runs.slice(1).reduce((rows, f) => rows + f.batch, 0)).toBe(3);

    const V = m.config.vocabSize;
    for (const [i, text] of SUFFIXES.entries()) {
      const { out, at } = await slotLogits(PREFIX + text, [], 1);
      const want = LABELS[i]!.map((l) => out.logits![at * V + m.tokenizer.tokenId(l)!]!);
      res.results[i]!.logits.forEach((got, j) => {
        expect(got).toBeCloseTo(want[j]!, 4);
      });
      expect(res.results[i]!.suffixTokens).toBe(m.tokenizer.encode(PREFIX + text).length - m.tokenizer.encode(PREFIX).length + 1);
    }
    expect(res.prefixTokens).toBe(m.tokenizer.encode(PREFIX).length);
    expect(res.inputTokens).toBe(res.prefixTokens + res.results.reduce((s, r) => s + r.suffixTokens, 0));
  });

  it("multi-token labels: log-probability by the chain rule, masks after the filled part", async () => {
    const m = model();
    const V = m.config.vocabSize;
    const labels = ["pay now", "<|opt_1|>", "sue them"];
    const res = await client.score({ model: "decisionmodel-0.1", prefix: PREFIX, suffixes: [{ text: SUFFIXES[1]!, labels }] });
    for (const [j, label] of labels.entries()) {
      const ids = m.tokenizer.encode(label);
      let want = 0;
      for (let k = 0; k < ids.length; k++) {
        const { out, at } = await slotLogits(PREFIX + SUFFIXES[1]!, ids.slice(0, k), ids.length - k);
        const row = out.logits!.subarray(at * V, (at + 1) * V);
        const max = Math.max(...row);
        const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
        want += row[ids[k]!]! - lse;
      }
      expect(res.results[0]!.logits[j]).toBeCloseTo(want, 4);
      expect(res.results[0]!.logits[j]).toBeLessThan(0);
    }
  });

  it("answers each suffix independently of the others", async () => {
    const one = await client.score({ model: "decisionmodel-0.1", prefix: PREFIX, suffixes: [{ text: SUFFIXES[2]!, labels: LABELS[2]! }] });
    const many = await client.score({
      model: "decisionmodel-0.1",
      prefix: PREFIX,
      suffixes: [2, 0, 1].map((i) => ({ text: SUFFIXES[i]!, labels: LABELS[i]! })),
    });
    one.results[0]!.logits.forEach((x, j) => {
      expect(many.results[0]!.logits[j]).toBeCloseTo(x, 5);
    });
  });

  it("refuses a prompt over the context and suffixes without labels", async () => {
    const long = await failure(() =>
      client.score({
        model: "decisionmodel-0.1",
        prefix: "lorem ipsum dolor ".repeat(800),
        suffixes: [{ text: "?", labels: ["<|yes|>"] }],
      }),
    );
    expect(long.code).toBe(Code.InvalidArgument);
    expect(long.message).toContain("too long");
    const empty = await failure(() => client.score({ model: "decisionmodel-0.1", prefix: PREFIX, suffixes: [{ text: "?", labels: [] }] }));
    expect(empty.code).toBe(Code.InvalidArgument);
    const none = await failure(() => client.score({ model: "decisionmodel-0.1", prefix: PREFIX, suffixes: [] }));
    expect(none.code).toBe(Code.InvalidArgument);
  });
});

describe("CountTokens and GetModelInfo", () => {
  it("counts a text or a rendered conversation", async () => {
    const m = pool.runtime("textmodel-26b")!.model;
    expect((await client.countTokens({ model: "textmodel-26b", text: "Hello world!" })).tokens).toBe(8);
    const messages = [user("hi")];
    const rendered = m.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n").length;
    expect((await client.countTokens({ model: "textmodel-26b", messages })).tokens).toBe(rendered);
  });

  it("describes the model, its decision configuration and slots", async () => {
    const info = await client.getModelInfo({ model: "decisionmodel-0.1" });
    expect(info).toMatchObject({
      model: "decisionmodel-0.1",
      maxPositions: 2048,
      blockSize: 64,
      supportsImages: false,
      supportsTools: true,
      supportsThinking: true,
      slotsTotal: 2,
      slotsFree: 2,
    });
    expect(info.decision?.labels).toMatchObject({ noul: ["<|yes|>", "<|no|>"] });
    expect(pool.servingIds).toEqual(["textmodel-26b", "decisionmodel-0.1"]);
    expect(pool.runtimes).toHaveLength(1); // both ids share one loaded model
    expect(pool.slotsTotal).toBe(2);
  });
});

describe("over real gRPC", () => {
  let server: http2.Http2Server;
  const sessions = new Set<http2.ServerHttp2Session>();
  let baseUrl: string;

  beforeAll(async () => {
    server = http2.createServer(connectNodeAdapter({ routes: inferenceRoutes({ pool, workerId: "worker-1" }) }));
    server.on("session", (s) => sessions.add(s));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sessions) s.close();
    await closed;
  });

  it("streams a generation to a typed gRPC client", async () => {
    const grpc = createClient(InferenceService, createGrpcTransport({ baseUrl }));
    const r = await collect({ model: "textmodel-26b", messages: [user("hi")] }, grpc);
    expect(r.events[0]?.case).toBe("started");
    expect(r.finished).toMatchObject({ finishReason: FinishReason.STOP, usage: { completionTokens: 6 } });
  });
});
