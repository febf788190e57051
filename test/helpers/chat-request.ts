// What the tests of the chat request mapper (gateway/mappers/chat*.test.ts) share: a minimal
// request, a tool, and parseChatRequest expected to succeed or to fail.
import type { GenerateRequest } from "../../gen/tessera/inference/v1/inference_pb.js";
import { type ChatRequestError, parseChatRequest } from "../../gateway/mappers/chat.js";

/** An object nested `depth` levels deep ({a: {a: … {}}}). */
export function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { a: value };
  return value;
}

export const base = { model: "textmodel-26b", messages: [{ role: "user", content: "Hi" }] };
export const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

export function ok(body: Record<string, unknown>, defaults = {}): { request: GenerateRequest; stream: boolean; includeUsage: boolean } {
  const parsed = parseChatRequest(body, defaults);
  if (!parsed.ok) throw new Error(`expected ok, got ${JSON.stringify(parsed.error)}`);
  return parsed;
}

export function fails(body: unknown): ChatRequestError {
  const parsed = parseChatRequest(body);
  if (parsed.ok) throw new Error("expected a validation error");
  return parsed.error;
}
