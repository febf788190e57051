// What the service may answer, by endpoint: the documented error shapes and statuses, or a
// valid success. Each check returns what is wrong, or undefined.
import type { Reply } from "./http-client.js";

export const REQUEST_ID = /^req_[0-9a-f]{32}$/;

/** Error statuses the API document and README list (5xx: 503 when no worker serves the model, 529 overloaded). */
const CLIENT_STATUSES = new Set([400, 401, 403, 404, 405, 408, 413, 414, 415, 417, 422, 429, 431]);

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function json(reply: Reply): { value: unknown } | string {
  const type = String(reply.headers["content-type"] ?? "");
  if (!type.startsWith("application/json")) return `content-type ${type}, not JSON`;
  try {
    return { value: JSON.parse(reply.body.toString("utf8")) as unknown };
  } catch {
    return `body is not JSON: ${reply.body.subarray(0, 200).toString("utf8")}`;
  }
}

function common(reply: Reply, allowed: Set<number>): string | undefined {
  const id = reply.headers["x-service-request-id"];
  if (typeof id !== "string" || !REQUEST_ID.test(id)) return `no x-service-request-id (${String(id)})`;
  if (reply.status >= 500) return `status ${reply.status}`;
  if (reply.status !== 200 && !allowed.has(reply.status)) return `undocumented status ${reply.status}`;
  return undefined;
}

/** `{"error": {"message", "type", "code"}}` */
export function openaiError(value: unknown): string | undefined {
  if (!isObject(value) || !isObject(value["error"])) return "not {error: {…}}";
  const { message, type, code } = value["error"];
  if (typeof message !== "string" || message === "") return "error.message is not a non-empty string";
  if (typeof type !== "string" || type === "") return "error.type is not a non-empty string";
  if (code !== null && typeof code !== "string") return "error.code is neither a string nor null";
  return undefined;
}

/** `{"detail": {"error_type", "message"}}` or `{"detail": [{"loc", "msg", "type"}, …]}` */
export function detailError(value: unknown, status: number): string | undefined {
  if (!isObject(value)) return "not an object";
  const detail = value["detail"];
  if (Array.isArray(detail)) {
    if (status !== 422) return `a violation list with status ${status}`;
    if (detail.length === 0) return "an empty violation list";
    for (const v of detail) {
      if (!isObject(v) || !Array.isArray(v["loc"]) || typeof v["msg"] !== "string" || typeof v["type"] !== "string")
        return `bad violation ${JSON.stringify(v)}`;
      if (!(v["loc"] as unknown[]).every((p) => typeof p === "string" || typeof p === "number"))
        return "loc holds something not a string or number";
    }
    return undefined;
  }
  if (!isObject(detail)) return "detail is neither an object nor a list";
  if (typeof detail["error_type"] !== "string" || typeof detail["message"] !== "string")
    return "detail without error_type and message strings";
  return undefined;
}

function checkChatSuccess(reply: Reply): string | undefined {
  const type = String(reply.headers["content-type"] ?? "");
  if (type.startsWith("text/event-stream")) {
    const events = reply.body
      .toString("utf8")
      .split("\n\n")
      .filter((e) => e !== "" && !e.startsWith(":"));
    const last = events.at(-1);
    for (const event of events) {
      if (!event.startsWith("data: ")) return `SSE event without data: ${event.slice(0, 100)}`;
      const data = event.slice(6);
      if (data === "[DONE]") continue;
      let chunk: unknown;
      try {
        chunk = JSON.parse(data);
      } catch {
        return `SSE data is not JSON: ${data.slice(0, 100)}`;
      }
      if (isObject(chunk) && "error" in chunk) {
        if (event !== last) return "an error event that is not the last";
        return openaiError(chunk);
      }
      if (!isObject(chunk) || chunk["object"] !== "chat.completion.chunk") return `not a chunk: ${data.slice(0, 100)}`;
    }
    return last === "data: [DONE]" ? undefined : "the stream does not end with [DONE]";
  }
  const parsed = json(reply);
  if (typeof parsed === "string") return parsed;
  const body = parsed.value;
  if (!isObject(body) || body["object"] !== "chat.completion" || !Array.isArray(body["choices"]) || !isObject(body["usage"])) {
    return `not a chat.completion: ${reply.body.subarray(0, 200).toString("utf8")}`;
  }
  return undefined;
}

export function checkChat(reply: Reply): string | undefined {
  const problem = common(reply, new Set([...CLIENT_STATUSES, 529]));
  if (problem !== undefined) return problem;
  if (reply.status === 200) return checkChatSuccess(reply);
  const parsed = json(reply);
  if (typeof parsed === "string") return parsed;
  if (reply.status === 529 && reply.headers["retry-after"] === undefined) return "529 without retry-after";
  return openaiError(parsed.value);
}

/** A decision answer has exactly the ids that were asked (checked by the caller when it knows them). */
export function checkDecision(reply: Reply): string | undefined {
  const problem = common(reply, new Set([...CLIENT_STATUSES, 529]));
  if (problem !== undefined) return problem;
  const parsed = json(reply);
  if (typeof parsed === "string") return parsed;
  if (reply.status === 200) {
    const body = parsed.value;
    if (!isObject(body) || typeof body["model"] !== "string" || !isObject(body["answers"]) || !isObject(body["usage"]))
      return "not a decision response";
    for (const answer of Object.values(body["answers"])) {
      if (!isObject(answer) || !["noul", "choice", "score"].includes(String(answer["type"]))) return `bad answer ${JSON.stringify(answer)}`;
    }
    return undefined;
  }
  return detailError(parsed.value, reply.status);
}

export function checkModels(reply: Reply, method: string): string | undefined {
  const problem = common(reply, CLIENT_STATUSES);
  if (problem !== undefined) return problem;
  if (method === "HEAD" && reply.body.length === 0) return undefined;
  // A request node:http could not parse (400, 408, 431) is answered with a body whatever its method.
  if (method === "HEAD" && reply.status !== 400 && reply.status !== 408 && reply.status !== 431) return "HEAD answered with a body";
  const parsed = json(reply);
  if (typeof parsed === "string") return parsed;
  if (reply.status === 200) {
    const body = parsed.value;
    return isObject(body) && Array.isArray(body["models"]) && body["object"] === "list" ? undefined : "not a model listing";
  }
  return detailError(parsed.value, reply.status);
}

/** Any path: chat paths answer in the OpenAI shape, the rest in the detail shape. */
export function checkAnyRoute(reply: Reply, path: string, method: string): string | undefined {
  const problem = common(reply, CLIENT_STATUSES);
  if (problem !== undefined) return problem;
  if (method === "HEAD") return undefined;
  const parsed = json(reply);
  if (typeof parsed === "string") return reply.status === 200 ? undefined : parsed;
  if (reply.status === 200) return undefined;
  if (path.startsWith("/v1/chat/") || path === "/v1/completions" || path === "/v1/responses") return openaiError(parsed.value);
  return detailError(parsed.value, reply.status);
}

const TERMINAL_RESPONSE_EVENTS = new Set(["response.completed", "response.incomplete", "response.failed"]);

/** POST /v1/responses: a `response` object, or its SSE events (`event:` naming each data's type, a terminal one last, no [DONE]). */
export function checkResponses(reply: Reply): string | undefined {
  const problem = common(reply, new Set([...CLIENT_STATUSES, 529]));
  if (problem !== undefined) return problem;
  if (reply.status !== 200) {
    const parsed = json(reply);
    if (typeof parsed === "string") return parsed;
    if (reply.status === 529 && reply.headers["retry-after"] === undefined) return "529 without retry-after";
    return openaiError(parsed.value);
  }
  if (String(reply.headers["content-type"] ?? "").startsWith("text/event-stream")) {
    const frames = reply.body
      .toString("utf8")
      .split("\n\n")
      .filter((f) => f !== "" && !f.startsWith(":"));
    let sequence = 0;
    for (const frame of frames) {
      const [eventLine, dataLine, ...rest] = frame.split("\n");
      if (!eventLine?.startsWith("event: ") || !dataLine?.startsWith("data: ") || rest.length > 0)
        return `not an event: ${frame.slice(0, 100)}`;
      let data: unknown;
      try {
        data = JSON.parse(dataLine.slice(6));
      } catch {
        return `SSE data is not JSON: ${dataLine.slice(0, 100)}`;
      }
      if (!isObject(data) || data["type"] !== eventLine.slice(7)) return `data type is not the event's: ${frame.slice(0, 100)}`;
      if (data["sequence_number"] !== sequence++) return `sequence_number ${String(data["sequence_number"])}, not ${sequence - 1}`;
    }
    const last = frames.at(-1)?.split("\n")[0]?.slice(7) ?? "";
    return TERMINAL_RESPONSE_EVENTS.has(last) ? undefined : `the stream ends with ${last || "nothing"}`;
  }
  const parsed = json(reply);
  if (typeof parsed === "string") return parsed;
  const body = parsed.value;
  if (!isObject(body) || body["object"] !== "response" || !Array.isArray(body["output"]) || !isObject(body["usage"])) {
    return `not a response: ${reply.body.subarray(0, 200).toString("utf8")}`;
  }
  return undefined;
}
