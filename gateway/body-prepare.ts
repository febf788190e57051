import { parseJson } from "./body.js";
import { parseChatRequest } from "./mappers/chat.js";
import { parseCompletionRequest } from "./mappers/completion.js";
import { parseResponsesRequest } from "./mappers/responses-request.js";

/**
 * What a route may have done to its JSON body besides parsing it, on whichever thread parses
 * it (body-parser.ts): large bodies are parsed and prepared on the body worker, so that
 * neither JSON.parse nor the schema's validation of megabytes holds the event loop.
 * A preparer is named, not passed, because a function cannot cross to a worker thread.
 */
export const BODY_PREPARERS = {
  /** The chat-completion request validated and mapped (a ParsedChatRequest; its requestId is left empty). */
  chat: (value: unknown) => parseChatRequest(value),
  /** The Responses request validated and mapped (a ParsedResponsesRequest; its requestId is left empty). */
  responses: (value: unknown) => parseResponsesRequest(value),
  /** The legacy completions request validated and mapped (a ParsedCompletionRequest; its requestId is left empty). */
  completion: (value: unknown) => parseCompletionRequest(value),
} as const;

export type BodyPreparer = keyof typeof BODY_PREPARERS;

/** Parses a JSON body (body.ts `parseJson`: 400/422 in the FastAPI way) and prepares it. */
export function prepareBody(bytes: Buffer, prepare: BodyPreparer | undefined): unknown {
  const value = parseJson(bytes);
  return prepare === undefined ? value : BODY_PREPARERS[prepare](value);
}
