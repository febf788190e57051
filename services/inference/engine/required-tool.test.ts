// tool_choice "required" with several tools: the tool is the one whose name the model finds
// most probable where a forced call's name starts (chain rule over each name's tokens, read
// exactly as a recomputation of the forced prompt gives them), then it is forced as a named
// tool_choice is. Unit rules, then the tiny model, then the Generate stream.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { Template } from "@huggingface/jinja";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ChatMessageSchema,
  FinishReason,
  GenerationOptionsSchema,
  type InferenceService,
  Role,
  ToolChoiceMode,
  ToolDefinitionSchema,
  type GenerateRequestSchema,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { buildChatPrompt, withForcedTool, type ChatPrompt, type ChatTemplateVariables } from "../prompt/chat-prompt.js";
import type { ModelRuntime } from "./runtime.js";
import type { ModelPool } from "./model-pool.js";
import { collectGeneration, startTinyInference } from "../../../test/helpers/inference-service.js";
import { chooseRequiredTool, forcedCallSplit, longestForcedPrompt, pickHighest } from "./required-tool.js";
import { fullForward, recordingRunner, type RecordedForward } from "../../../test/helpers/inference-engine.js";
import { toConnectError } from "../connect-errors.js";

const MODEL = "textmodel-26b";
let pool: ModelPool;
let engine: ModelRuntime;
let client: Client<typeof InferenceService>;
let forwards: RecordedForward[] = [];

beforeAll(async () => {
  ({ pool, client } = await startTinyInference({
    servingIds: [MODEL],
    wrapRunner: (inner) => {
      const r = recordingRunner(inner);
      forwards = r.forwards;
      return r;
    },
  }));
  engine = pool.runtime(MODEL)!;
});

afterAll(async () => {
  await pool?.close();
});

const render = (variables: ChatTemplateVariables) => engine.model.renderChat(variables);
const context = () => ({ model: MODEL, render });
const REQUIRED = { choice: { case: "mode" as const, value: ToolChoiceMode.REQUIRED } };
const QUESTION = "What is the weather in Paris?";

function requiredPrompt(names: readonly string[], extra: { enableThinking?: boolean } = {}): ChatPrompt {
  return buildChatPrompt(MODEL, engine.model.config.capabilities, {
    messages: [create(ChatMessageSchema, { role: Role.USER, content: [{ part: { case: "text", value: QUESTION } }] })],
    tools: names.map((name) => create(ToolDefinitionSchema, { name, description: `The ${name} tool` })),
    options: create(GenerationOptionsSchema, { ...extra, toolChoice: REQUIRED }),
  });
}

function logSoftmaxAt(logits: Float32Array, row: number, token: number): number {
  const V = engine.decode.vocabSize;
  const values = logits.subarray(row * V, (row + 1) * V);
  let max = -Infinity;
  for (const x of values) max = Math.max(max, x);
  let sum = 0;
  for (const x of values) sum += Math.exp(x - max);
  return values[token]! - max - Math.log(sum);
}

/**
 * A name's chain-rule log-probability recomputed from position 0 on the forced prompt's own
 * tokens: everything before the name, the name's first k tokens, masks over the rest of it.
 */
async function recomputed(prompt: ChatPrompt, name: string): Promise<{ logProb: number; firstLogit: number }> {
  const { tokenizer } = engine.model;
  const text = render(withForcedTool(prompt, name).variables);
  const ids = tokenizer.encode(text);
  const before = tokenizer.encode(forcedCallSplit(prompt.variables, render)!.before);
  const nameIds = tokenizer.encode(name);
  // What Score reads (prefix and name encoded apart) are the forced prompt's own tokens.
  expect(ids.slice(0, before.length + nameIds.length)).toEqual([...before, ...nameIds]);
  let logProb = 0;
  let firstLogit = 0;
  for (let k = 0; k < nameIds.length; k++) {
    const masks = new Array<number>(nameIds.length - k).fill(engine.decode.maskTokenId);
    const out = await fullForward(engine.model, engine.runner, [...before, ...nameIds.slice(0, k), ...masks]);
    const at = before.length + k;
    logProb += logSoftmaxAt(out.logits!, at, nameIds[k]!);
    if (k === 0) firstLogit = out.logits![at * engine.decode.vocabSize + nameIds[0]!]!;
  }
  return { logProb, firstLogit };
}

const argmax = (values: readonly number[]) => values.indexOf(Math.max(...values));

describe("pickHighest", () => {
  it("picks the highest value, the first one on ties, never NaN", () => {
    expect(pickHighest([-3, -1.5, -2])).toBe(1);
    expect(pickHighest([-1, -1, -2])).toBe(0);
    expect(pickHighest([-2, -0.5, -0.5])).toBe(1);
    expect(pickHighest([7])).toBe(0);
    expect(pickHighest([NaN, -5, NaN])).toBe(1);
    expect(pickHighest([NaN, NaN])).toBe(0);
    expect(pickHighest([-Infinity, -Infinity])).toBe(0);
  });
});

describe("forcedCallSplit", () => {
  it("cuts the forced prompt where the name starts, thinking or not", () => {
    for (const enableThinking of [false, true]) {
      const prompt = requiredPrompt(["get_weather", "search_web"], { enableThinking });
      const split = forcedCallSplit(prompt.variables, render)!;
      expect(split.before.endsWith('<|im_start|>assistant\n<tool_call>{"name": "')).toBe(true);
      expect(split.after).toBe('", "arguments": ');
      expect(render(withForcedTool(prompt, "search_web").variables)).toBe(`${split.before}search_web${split.after}`);
    }
  });

  it("a conversation that holds the marker changes nothing", () => {
    const prompt = requiredPrompt(["a", "b"]);
    prompt.variables.messages[0]!.content = "say tessera_forced_tool_name_marker twice: tessera_forced_tool_name_marker";
    const split = forcedCallSplit(prompt.variables, render)!;
    expect(render(withForcedTool(prompt, "b").variables)).toBe(`${split.before}b${split.after}`);
  });

  it("a template that ignores forced_tool cannot honour required: FailedPrecondition naming the model", async () => {
    const plain = new Template("{% for m in messages %}{{ m.content }}{% endfor %}<|im_start|>assistant\n");
    const prompt = requiredPrompt(["a", "b"]);
    const renderPlain = (v: ChatTemplateVariables) => plain.render(v as unknown as Record<string, unknown>);
    expect(forcedCallSplit(prompt.variables, renderPlain)).toBeUndefined();
    const err = ConnectError.from(
      toConnectError(await chooseRequiredTool(engine, prompt, { model: MODEL, render: renderPlain }).catch((e: unknown) => e)),
    );
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.message).toContain(`"${MODEL}"`);
  });
});

describe("chooseRequiredTool on the tiny model", () => {
  it("multi-token names: the chain-rule log-probability of each, equal to a recomputation; the highest wins", async () => {
    const names = ["lookup", "get_weather", "send_email"];
    for (const name of names) expect(engine.model.tokenizer.encode(name).length).toBeGreaterThan(1);
    const prompt = requiredPrompt(names);
    const before = forwards.length;
    const choice = await chooseRequiredTool(engine, prompt, context());
    // The prompt's complete blocks once, then the names' 6 + 5 + 7 chain-rule rows batched
    // over that past (one forward today; Score decides how to group them).
    const shared = Math.floor(engine.model.tokenizer.encode(forcedCallSplit(prompt.variables, render)!.before).length / 64) * 64;
    const runs = forwards.slice(before);
    expect(runs[0]).toMatchObject({ batch: 1, past: 0 });
    expect(runs.slice(1).map((f) => f.past)).toEqual(runs.slice(1).map(() => shared));
    expect(runs.length - 1).toBeLessThan(6 + 5 + 7);

    const want = await Promise.all(names.map((name) => recomputed(prompt, name)));
    choice.scores.forEach((got, i) => {
      expect(got).toBeCloseTo(want[i]!.logProb, 4);
    });
    const best = argmax(want.map((w) => w.logProb));
    expect(best).not.toBe(0); // not simply the first tool
    expect(choice.tool).toBe(names[best]);
    expect(choice.prompt.parser.forcedTool).toBe(names[best]);
    expect(choice.prompt.variables.forced_tool).toBe(names[best]);
    expect(choice.text).toBe(render(withForcedTool(prompt, names[best]!).variables));
    expect(choice.scoredTokens).toBe(engine.model.tokenizer.encode(forcedCallSplit(prompt.variables, render)!.before).length + 1);
  });

  it("single-token names: the logits at the one answer slot rank them as their probabilities do", async () => {
    const names = ["a", "b", "c"];
    for (const name of names) expect(engine.model.tokenizer.encode(name)).toHaveLength(1);
    for (const question of ["hi", QUESTION]) {
      const prompt = requiredPrompt(names);
      prompt.variables.messages[0]!.content = question;
      const choice = await chooseRequiredTool(engine, prompt, context());
      const want = await Promise.all(names.map((name) => recomputed(prompt, name)));
      choice.scores.forEach((got, i) => {
        expect(got).toBeCloseTo(want[i]!.firstLogit, 4);
      });
      expect(choice.tool).toBe(names[argmax(want.map((w) => w.logProb))]);
    }
  });

  it("names of one token and of several compare on one scale (log-probabilities)", async () => {
    const names = ["state", "option", "question"];
    expect(names.map((n) => engine.model.tokenizer.encode(n).length)).toEqual([1, 2, 2]);
    const prompt = requiredPrompt(names);
    const choice = await chooseRequiredTool(engine, prompt, context());
    const want = await Promise.all(names.map((name) => recomputed(prompt, name)));
    choice.scores.forEach((got, i) => {
      expect(got).toBeCloseTo(want[i]!.logProb, 4);
    });
    expect(choice.tool).toBe(names[argmax(want.map((w) => w.logProb))]);
  });

  it("is deterministic, also beside other work on the model", async () => {
    const prompt = requiredPrompt(["lookup", "get_weather", "send_email", "book_flight"]);
    const alone = await chooseRequiredTool(engine, prompt, context());
    const [busy] = await Promise.all([
      chooseRequiredTool(engine, prompt, context()),
      chooseRequiredTool(engine, requiredPrompt(["x", "y"]), context()),
      (async () => {
        for await (const _ of client.generate({
          model: MODEL,
          messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "hi" } }] }],
          options: { maxTokens: 100 },
        }))
          void _;
      })(),
    ]);
    expect(busy.tool).toBe(alone.tool);
    expect(busy.scores).toEqual(alone.scores);
  });

  it("a name the template escapes (only through the gRPC API) is scored as the template writes it", async () => {
    const names = ['say "hi"', "b"];
    const prompt = requiredPrompt(names);
    const choice = await chooseRequiredTool(engine, prompt, context());
    expect(choice.scores).toHaveLength(2);
    expect(choice.text).toBe(render(withForcedTool(prompt, choice.tool).variables));
    const escaped = longestForcedPrompt(engine.model.tokenizer, prompt, context());
    expect(escaped).toBe(render(withForcedTool(prompt, 'say "hi"').variables));
    expect(escaped.endsWith('{"name": "say \\"hi\\"", "arguments": ')).toBe(true);
  });

  it("CountTokens' prompt: the forced prompt of the name with the most tokens", () => {
    const prompt = requiredPrompt(["a", "send_email", "lookup"]);
    const text = longestForcedPrompt(engine.model.tokenizer, prompt, context());
    expect(text).toBe(render(withForcedTool(prompt, "send_email").variables));
  });
});

describe("Generate with tool_choice required and several tools", () => {
  const TOOLS: MessageInitShape<typeof ToolDefinitionSchema>[] = [
    { name: "lookup", description: "Look a word up", parameters: { type: "object", properties: { word: { type: "string" } } } },
    { name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { type: "string" } } } },
    { name: "send_email", description: "Send an e-mail", parameters: { type: "object", properties: { to: { type: "string" } } } },
  ];

  async function collect(req: MessageInitShape<typeof GenerateRequestSchema>) {
    const { started, finished, deltas, content, reasoning } = await collectGeneration(client, req);
    const pieces = deltas.flatMap((d) => d.toolCalls);
    return {
      started,
      finished,
      deltas,
      content,
      reasoning,
      call: {
        name: pieces[0]?.name,
        arguments: pieces.map((p) => p.arguments).join(""),
        indexes: [...new Set(pieces.map((p) => p.index))],
      },
    };
  }

  const request = (toolChoice: MessageInitShape<typeof GenerationOptionsSchema>["toolChoice"], extra = {}) => ({
    model: MODEL,
    requestId: "req-1",
    messages: [{ role: Role.USER, content: [{ part: { case: "text" as const, value: QUESTION } }] }],
    tools: TOOLS,
    options: { toolChoice, ...extra },
  });

  it("the reply is a call of one of the tools, finish_reason tool_calls, exactly the named choice of that tool", async () => {
    const required = await collect(request(REQUIRED));
    expect(required.finished.finishReason).toBe(FinishReason.TOOL_CALLS);
    expect(TOOLS.map((t) => t.name)).toContain(required.call.name);
    expect(required.call.indexes).toEqual([0]);
    expect(required.content).toBe("");
    // The call's header (id, name) goes out with the first delta.
    const first = required.deltas[0]!.toolCalls[0]!;
    expect(first).toMatchObject({ index: 0, name: required.call.name });
    expect(first.id).toMatch(/^call_[A-Za-z0-9]{24}$/);

    // Arguments: a JSON object, or the named case's repair of what the model wrote.
    const named = await collect(request({ choice: { case: "functionName", value: required.call.name! } }));
    expect(required.call.arguments).toBe(named.call.arguments);
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(required.call.arguments);
    } catch {
      // not JSON: the named case's repair, checked above
    }
    if (parsed !== null) expect(typeof parsed === "object" && !Array.isArray(parsed)).toBe(true);
    expect(required.finished.usage).toEqual(named.finished.usage);
    expect(required.started.promptTokens).toBe(named.started.promptTokens);
  });

  it("prompt_tokens are the forced prompt's; CountTokens reserves at least that many", async () => {
    const required = await collect(request(REQUIRED));
    const prompt = buildChatPrompt(MODEL, engine.model.config.capabilities, {
      messages: [create(ChatMessageSchema, { role: Role.USER, content: [{ part: { case: "text", value: QUESTION } }] })],
      tools: TOOLS.map((t) => create(ToolDefinitionSchema, t)),
      options: create(GenerationOptionsSchema, { toolChoice: REQUIRED }),
    });
    const forced = engine.model.tokenizer.encode(render(withForcedTool(prompt, required.call.name!).variables)).length;
    expect(required.started.promptTokens).toBe(forced);
    expect(required.finished.usage!.promptTokens).toBe(forced);
    const counted = await client.countTokens({
      model: MODEL,
      messages: request(REQUIRED).messages,
      tools: TOOLS,
      options: { toolChoice: REQUIRED },
    });
    expect(counted.tokens).toBeGreaterThanOrEqual(forced);
  });

  it("with thinking on the reply still starts as the call (no thinking span first); max_tokens can cut it (length)", async () => {
    const thinking = await collect(request(REQUIRED, { enableThinking: true }));
    expect(thinking.finished.finishReason).toBe(FinishReason.TOOL_CALLS);
    expect(TOOLS.map((t) => t.name)).toContain(thinking.call.name);
    expect(thinking.deltas[0]!.toolCalls[0]).toMatchObject({ index: 0, name: thinking.call.name });
    const named = await collect(request({ choice: { case: "functionName", value: thinking.call.name! } }, { enableThinking: true }));
    expect({ ...thinking, deltas: undefined, started: undefined }).toEqual({ ...named, deltas: undefined, started: undefined });
    const short = await collect(request(REQUIRED, { maxTokens: 3 }));
    expect(short.finished.finishReason).toBe(FinishReason.LENGTH);
    expect(short.deltas[0]!.toolCalls[0]!.name).toBe(thinking.call.name);
  });

  it("refuses a conversation too long for the context before reading any name", async () => {
    const long = request(REQUIRED);
    long.messages[0]!.content[0]!.part.value = "lorem ipsum dolor ".repeat(800);
    const before = forwards.length;
    const err = ConnectError.from(await collect(long).catch((e: unknown) => e));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.message).toContain("too long");
    expect(forwards.length).toBe(before);
  });
});
