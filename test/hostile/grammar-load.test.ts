// The grammar and text threads under hostile but valid chats (issue 27, items 1–4), against
// `tessera serve` with the tiny model in a process of its own, compile budget 600 ms:
// 4 schemas that compile in ~0.3 s each, sent at once to a fresh server, are all answered (the
// budget counts a compile's own CPU time, not the queue); a `required` tool call beside four
// compiles that run past the budget answers within 3 s (compiles run on threads of their own and
// are stopped at the budget); a schema with no finite value is a 400, also repeated, and the
// server's RSS stays within 100 MiB; 128 tools of 50,000-character descriptions are refused
// in < 1 s before any tokenizing, with a chat beside them answered within 1 s.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rssOf, startTinyServe, type TinyServe } from "../helpers/hostile.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

let serve: TinyServe;
const key = () => serve.key;

beforeAll(async () => {
  serve = await startTinyServe("grammar-load", TINY_MODEL_DIR, {
    TESSERA_GRAMMAR_COMPILE_BUDGET_MS: "600",
  });
}, 90_000);
afterAll(async () => {
  await serve?.close();
});

type Answer = { status: number; ms: number; body: { error?: { message: string }; choices?: unknown[] } };

async function chat(body: object): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${serve.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key()}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "textmodel-26b", max_tokens: 16, messages: [{ role: "user", content: "Hi" }], ...body }),
  });
  const answer = (await res.json()) as Answer["body"];
  return { status: res.status, ms: performance.now() - started, body: answer };
}

/** An object of `n` required strings with length bounds from `bound` up (XGrammar's slow case), named by `tag`. */
function boundedStrings(tag: string, n: number, bound: number) {
  const properties = Object.fromEntries(Array.from({ length: n }, (_, i) => [`${tag}${i}`, { type: "string", maxLength: bound + i }]));
  return { type: "object", properties, required: Object.keys(properties), additionalProperties: false };
}

const withSchema = (schema: object) => ({ response_format: { type: "json_schema", json_schema: { name: "s", schema } } });

describe("grammar compiles under load", () => {
  it("answers 4 parallel schemas of ~0.3 s each on a fresh server (the budget is compile time, not queue time)", async () => {
    const answers = await Promise.all(["a", "b", "c", "d"].map((tag) => chat(withSchema(boundedStrings(tag, 5, 200)))));
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
  }, 60_000);

  it("answers a required tool call within 3 s beside four compiles that run past the budget", async () => {
    const slow = ["p", "q", "r", "s"].map((tag) => chat(withSchema(boundedStrings(tag, 40, 200))));
    await new Promise((r) => setTimeout(r, 200));
    const tools = [
      { type: "function", function: { name: "lookup", parameters: { type: "object", properties: { id: { type: "integer" } } } } },
    ];
    const call = await chat({ tools, tool_choice: "required" });
    expect(call.status, JSON.stringify(call.body)).toBe(200);
    expect(call.ms).toBeLessThanOrEqual(3000);
    for (const a of await Promise.all(slow)) {
      expect(a.status).toBe(400);
      expect(a.body.error?.message).toMatch(/did not compile within the budget of 600 ms/);
    }
    // The refusal is remembered: at once the second time.
    const again = await chat(withSchema(boundedStrings("p", 40, 200)));
    expect(again.status).toBe(400);
    expect(again.ms).toBeLessThan(1000);
  }, 60_000);
});

describe("a schema with no finite value", () => {
  it("is a 400 naming the problem, repeated, with RSS within 100 MiB of its start", async () => {
    const start = rssOf(serve.child.pid!);
    const schema = { type: "object", properties: { c: { $ref: "#" } }, required: ["c"], additionalProperties: false };
    for (let i = 0; i < 3; i++) {
      const a = await chat(withSchema(schema));
      expect(a.status, JSON.stringify(a.body)).toBe(400);
      expect(a.body.error?.message).toMatch(/has no finite value/);
    }
    expect(rssOf(serve.child.pid!) - start).toBeLessThan(100 * 2 ** 20);
    expect((await chat({})).status).toBe(200);
  }, 60_000);
});

describe("128 tools of 50,000-character descriptions (6.4 MB)", () => {
  it("are refused in < 1 s before any tokenizing, and a chat beside them answers within 1 s", async () => {
    // Warm: the first chat, and the body worker (bodies of 128 KiB and more are parsed there; it starts on the first).
    await chat({ messages: [{ role: "user", content: "x".repeat(200_000) }] });
    const description = "lorem ipsum dolor sit amet ".repeat(2000).slice(0, 50_000);
    const tools = Array.from({ length: 128 }, (_, i) => ({ type: "function", function: { name: `tool${i}`, description } }));
    const big = chat({ tools });
    await new Promise((r) => setTimeout(r, 300));
    const small = await chat({});
    const refused = await big;
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error?.message).toMatch(/prompt too long/);
    expect(refused.ms).toBeLessThan(1000);
    expect(small.status).toBe(200);
    expect(small.ms).toBeLessThanOrEqual(1000);
  }, 60_000);
});
