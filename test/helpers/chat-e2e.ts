// What the end-to-end chat tests (test/e2e/chat*.test.ts) share: the model and question they
// ask, the weather tool, a client and a raw POST against a running Tessera, and the check of an
// OpenAI error body.
import OpenAI from "openai";
import { expect } from "vitest";
import type { TestTessera } from "./tessera.js";

export function clientFor(server: TestTessera, apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 60_000 });
}

export const MODEL = "textmodel-26b";
export const ask = { model: MODEL, messages: [{ role: "user" as const, content: "What is the weather like in Paris today?" }] };
export const weatherTool = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
export const forceWeather = { type: "function" as const, function: { name: "get_weather" } };

/** The OpenAI error body (the only part of a response these helpers' callers read). */
export type ErrorJson = { error: { message: string; type: string; code?: string | null; param?: string | null } };

/** POST /v1/chat/completions on `server` as given (a string body is sent as is). */
export async function postChat(server: TestTessera, body: unknown, init: { key?: string | null } = {}) {
  const res = await server.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: JSON.parse(text) as ErrorJson };
}

export function expectOpenAiError(
  res: { status: number; json: ErrorJson; headers: Headers },
  status: number,
  type: string,
  extra: { code?: string; param?: string | null } = {},
) {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  expect(res.json.error).toMatchObject({ type, message: expect.any(String), ...extra });
  expect(res.headers.get("x-service-request-id")).toMatch(/\S/);
}
