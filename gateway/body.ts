import type { IncomingMessage } from "node:http";
import { MAX_JSON_DEPTH, parseJsonText } from "../lib/safe-json.js";
import { HttpError, type Violation } from "./errors.js";

/** Largest request body accepted on every POST route: 8 MiB. */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/** The client went away before its body arrived; nobody is left to answer. */
export class ClientGone extends Error {
  constructor() {
    super("client closed the connection");
    this.name = "ClientGone";
  }
}

export function tooLarge(limit: number): HttpError {
  return new HttpError(413, "invalid_request_error", `request body is larger than ${limit} bytes (8 MB)`, {
    code: "request_too_large",
  });
}

/**
 * Refuses a body before reading it: a content type other than application/json (415) or a
 * declared Content-Length over the limit (413). Returns the error, or undefined when the
 * body may be read.
 */
export function checkBodyHeaders(req: IncomingMessage, limit: number): HttpError | undefined {
  const type = req.headers["content-type"];
  if (type === undefined || !JSON_TYPE.test(type)) {
    return new HttpError(415, "invalid_request_error", "Content-Type must be application/json", {
      code: "unsupported_media_type",
    });
  }
  const length = req.headers["content-length"];
  if (length !== undefined && Number(length) > limit) return tooLarge(limit);
  return undefined;
}

/**
 * Reads the body while it streams in and fails with 413 as soon as it passes `limit`
 * bytes (chunked bodies without Content-Length included), so no more than the limit is
 * ever buffered. The rest of an oversized body is left unread for the caller to discard.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onGone = () => {
      cleanup();
      reject(new ClientGone());
    };
    const onClose = () => {
      if (!req.complete) onGone();
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onGone);
    req.on("close", onClose);
  });
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses a JSON body. Problems are reported the FastAPI way (loc, msg, type): an empty
 * body is `missing`, bad UTF-8 or bad JSON is `json_invalid` with the byte position, JSON
 * nested deeper than `maxDepth` is `too_deep` (checked before parsing: see lib/safe-json).
 */
export function parseJson(body: Buffer, maxDepth = MAX_JSON_DEPTH): unknown {
  if (body.length === 0) {
    throw HttpError.invalid([{ loc: ["body"], msg: "Field required", type: "missing" }]);
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw unparsable(
      { loc: ["body"], msg: "body is not valid UTF-8", type: "json_invalid" },
      "The request body is not valid UTF-8.",
      "json_invalid",
    );
  }
  const parsed = parseJsonText(text, maxDepth);
  if (parsed.ok) return parsed.value;
  if (parsed.reason === "depth") {
    throw unparsable(
      { loc: ["body", parsed.position], msg: `JSON nested deeper than ${parsed.limit} levels of objects and arrays`, type: "too_deep" },
      `The JSON body is nested deeper than ${parsed.limit} levels of objects and arrays (at character ${parsed.position}).`,
      "json_too_deep",
    );
  }
  throw unparsable(
    { loc: ["body", parsed.position], msg: "JSON decode error", type: "json_invalid" },
    `We could not parse the JSON body of your request (at character ${parsed.position}).`,
    "json_invalid",
  );
}

/** A body that is not a JSON document: 422 with the violation (System One), 400 naming no field (OpenAI). */
function unparsable(violation: Violation, message: string, code: string): HttpError {
  return new HttpError(400, "invalid_request_error", message, { code, param: null, violations: [violation] });
}
