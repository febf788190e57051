// Every size limit answers with a clear error naming the limit, in the endpoint's shape:
// JSON nesting, state size, number of questions, number and length of messages, image size,
// header size (431) and URL length (414).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_IMAGE_URL_CHARS, MAX_MESSAGE_CHARS, MAX_MESSAGES } from "../../gateway/mappers/chat.js";
import { MAX_JSON_DEPTH } from "../../lib/safe-json.js";
import { MAX_JSON_DEPTH as MAX_STATE_DEPTH, MAX_QUESTIONS, MAX_STATE_CHARS } from "../../lib/decision-types/rules.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { rawExchange } from "./http-client.js";
import { REQUEST_ID } from "./shapes.js";

let tessera: TestTessera;

beforeAll(async () => {
  // No model: every limit is checked before a model is looked up.
  tessera = await startTestTessera({
    models: "none",
    env: { TESSERA_DEFAULT_RPM: "1000000", TESSERA_MAX_URL_BYTES: "4096", TESSERA_MAX_HEADER_BYTES: "8192" },
  });
});
afterAll(async () => {
  await tessera?.close();
});

async function post(path: string, body: string) {
  const res = await tessera.fetch(path, { method: "POST", body, headers: { "content-type": "application/json" } });
  expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const chat = (extra: Record<string, unknown>) =>
  JSON.stringify({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }], ...extra });
const decision = (extra: Record<string, unknown>) =>
  JSON.stringify({ model: "decisionmodel-latest", state: "s", questions: { q: { type: "noul" } }, ...extra });

describe("limits of a request body", () => {
  it(`refuses JSON nested deeper than ${MAX_JSON_DEPTH} levels before parsing it, in both shapes`, async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    const prefix = '{"model":"textmodel-26b","messages":';
    const openai = await post("/v1/chat/completions", `${prefix}${deep}}`);
    expect(openai).toEqual({
      status: 400,
      body: {
        error: {
          message: `The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays (at character ${prefix.length + MAX_JSON_DEPTH - 1}).`,
          type: "invalid_request_error",
          code: "json_too_deep",
          param: null,
        },
      },
    });
    const detail = await post("/v1/systemone", `{"state":${deep}}`);
    expect(detail).toEqual({
      status: 422,
      body: {
        detail: [
          {
            loc: ["body", 9 + MAX_JSON_DEPTH - 1],
            msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`,
            type: "too_deep",
          },
        ],
        error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
      },
    });
    // Just inside the body limit, the state's own limit speaks.
    const state = "[".repeat(MAX_STATE_DEPTH + 1) + "]".repeat(MAX_STATE_DEPTH + 1);
    const inner = await post("/v1/systemone", decision({ state: JSON.parse(state) as unknown }));
    expect(inner).toEqual({
      status: 422,
      body: {
        detail: [{ loc: ["body", "state"], msg: `objects and arrays may be nested at most ${MAX_STATE_DEPTH} deep`, type: "too_deep" }],
        error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
      },
    });
  });

  it(`refuses a state longer than ${MAX_STATE_CHARS} characters, as a string or as JSON`, async () => {
    const long = "x".repeat(MAX_STATE_CHARS + 1);
    const msg = `state may be at most ${MAX_STATE_CHARS} characters long (as JSON text)`;
    expect(await post("/v1/systemone", decision({ state: long }))).toEqual({
      status: 422,
      body: {
        detail: [{ loc: ["body", "state"], msg, type: "too_long" }],
        error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
      },
    });
    expect(await post("/v1/systemone", decision({ state: { text: long.slice(5) } }))).toEqual({
      status: 422,
      body: {
        detail: [{ loc: ["body", "state"], msg, type: "too_long" }],
        error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
      },
    });
    // At the limit it passes validation (and then finds no model served here).
    expect((await post("/v1/systemone", decision({ state: long.slice(1) }))).status).toBe(503);
  });

  it(`refuses more than ${MAX_QUESTIONS} questions without looking at each`, async () => {
    const questions = Object.fromEntries(Array.from({ length: MAX_QUESTIONS + 1 }, (_, i) => [`q${i}`, { type: "bogus" }]));
    expect(await post("/v1/systemone", decision({ questions }))).toEqual({
      status: 422,
      body: {
        detail: [{ loc: ["body", "questions"], msg: `questions may hold at most ${MAX_QUESTIONS} questions`, type: "too_long" }],
        error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
      },
    });
    const enough = Object.fromEntries(Array.from({ length: MAX_QUESTIONS }, (_, i) => [`q${i}`, { type: "noul" }]));
    expect((await post("/v1/systemone", decision({ questions: enough }))).status).toBe(503);
  });

  it(`refuses more than ${MAX_MESSAGES} messages`, async () => {
    const messages = Array.from({ length: MAX_MESSAGES + 1 }, () => ({ role: "user", content: "hi" }));
    expect(await post("/v1/chat/completions", chat({ messages }))).toEqual({
      status: 400,
      body: {
        error: {
          message: `Invalid 'messages': array too long. Expected an array with maximum length ${MAX_MESSAGES}, but got an array with length ${MAX_MESSAGES + 1} instead.`,
          type: "invalid_request_error",
          code: "array_above_max_length",
          param: "messages",
        },
      },
    });
  });

  it(`refuses a message longer than ${MAX_MESSAGE_CHARS} characters, content parts and tool calls counted together`, async () => {
    const half = "y".repeat(MAX_MESSAGE_CHARS / 2);
    const parts = [
      { type: "text", text: half },
      { type: "text", text: `${half}z` },
    ];
    const res = await post(
      "/v1/chat/completions",
      chat({
        messages: [
          { role: "user", content: "hi" },
          { role: "user", content: parts },
        ],
      }),
    );
    expect(res).toEqual({
      status: 400,
      body: {
        error: {
          message: `Invalid 'messages[1]': message too long. Expected at most ${MAX_MESSAGE_CHARS} characters of text, but got ${MAX_MESSAGE_CHARS + 1} instead.`,
          type: "invalid_request_error",
          code: "string_above_max_length",
          param: "messages[1].content",
        },
      },
    });
    const call = { id: "c1", type: "function", function: { name: "f", arguments: `"${"a".repeat(MAX_MESSAGE_CHARS)}"` } };
    const assistant = await post("/v1/chat/completions", chat({ messages: [{ role: "assistant", content: null, tool_calls: [call] }] }));
    expect((assistant.body["error"] as { code: string }).code).toBe("string_above_max_length");
  });

  it(`refuses a data: URL image longer than ${MAX_IMAGE_URL_CHARS} characters`, async () => {
    const url = `data:image/png;base64,${"A".repeat(MAX_IMAGE_URL_CHARS)}`;
    const res = await post(
      "/v1/chat/completions",
      chat({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] }),
    );
    expect(res.status).toBe(400);
    expect(res.body["error"]).toMatchObject({ code: "string_above_max_length", param: "messages[0].content[0].image_url.url" });
  });
});

describe("limits of Connect calls on the public port", () => {
  it("refuses a call body over 8 MiB (Connect's own default would read up to 4 GiB)", async () => {
    const body = `{"kind":0,"padding":"${"a".repeat(8 * 1024 * 1024)}"}`;
    const res = await tessera.fetch("/tessera.registry.v1.RegistryService/ListModels", {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({
      code: "resource_exhausted",
      message: `message size ${Buffer.byteLength(body)} is larger than configured readMaxBytes 8388608`,
    });
  });

  it(`holds direct Decide calls to the same ${MAX_QUESTIONS} questions and ${MAX_STATE_CHARS}-character state`, async () => {
    const questionList = Array.from({ length: MAX_QUESTIONS + 1 }, (_, i) => ({ id: `q${i}`, question: { type: "QUESTION_TYPE_NOUL" } }));
    const call = (body: unknown) =>
      tessera.fetch("/tessera.decision.v1.DecisionService/Decide", {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json" },
      });
    const many = await call({ model: "decisionmodel-latest", state: "s", questionList });
    expect(many.status).toBe(400);
    expect(((await many.json()) as { code: string; message: string }).message).toMatch(
      `questions may hold at most ${MAX_QUESTIONS} questions`,
    );
    const long = await call({
      model: "decisionmodel-latest",
      state: "x".repeat(MAX_STATE_CHARS + 1),
      questionList: questionList.slice(0, 1),
    });
    expect(long.status).toBe(400);
    expect(((await long.json()) as { message: string }).message).toMatch("state may be at most");
  });
});

describe("limits of the request line and headers", () => {
  it("answers a request target over TESSERA_MAX_URL_BYTES with 414 in the path's shape", async () => {
    const long = `/v1/models?q=${"a".repeat(4096)}`;
    const res = await tessera.fetch(long);
    expect(res.status).toBe(414);
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toEqual({
      detail: { error_type: "invalid_request_error", message: "the request target (path and query) is longer than 4096 bytes" },
      error: {
        message: "the request target (path and query) is longer than 4096 bytes",
        type: "invalid_request_error",
        code: expect.any(String),
        param: null,
      },
    });
    const chatRes = await tessera.fetch(`/v1/chat/completions?${"b".repeat(5000)}`, {
      method: "POST",
      body: chat({}),
      headers: { "content-type": "application/json" },
    });
    expect(chatRes.status).toBe(414);
    expect(((await chatRes.json()) as { error: { code: string } }).error.code).toBe("uri_too_long");
    expect((await tessera.fetch(`/v1/models?q=${"a".repeat(4000)}`)).status).not.toBe(414);
  });

  it("answers headers over TESSERA_MAX_HEADER_BYTES with 431 in JSON, then closes the connection", async () => {
    const request = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${tessera.key}\r\nx-big: ${"h".repeat(9000)}\r\n\r\n`;
    const res = await rawExchange(tessera.port, Buffer.from(request));
    expect(res.status).toBe(431);
    expect(res.headers["connection"]).toBe("close");
    expect(res.headers["x-service-request-id"]).toMatch(REQUEST_ID);
    expect(JSON.parse(res.body.toString())).toEqual({
      detail: { error_type: "invalid_request_error", message: "the request line and headers are larger than this server accepts" },
      error: {
        message: "the request line and headers are larger than this server accepts",
        type: "invalid_request_error",
        code: expect.any(String),
        param: null,
      },
    });
  });

  it("answers a request node cannot parse with 400 in JSON", async () => {
    const res = await rawExchange(tessera.port, Buffer.from("GET /v1/models HTTP/1.1\r\nho st: x\r\n\r\n"));
    expect(res.status).toBe(400);
    expect(res.headers["x-service-request-id"]).toMatch(REQUEST_ID);
    expect(JSON.parse(res.body.toString())).toEqual({
      detail: { error_type: "invalid_request_error", message: "malformed HTTP request" },
      error: { message: "malformed HTTP request", type: "invalid_request_error", code: expect.any(String), param: null },
    });
  });
});
