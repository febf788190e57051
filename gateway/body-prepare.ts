import { parseJson } from "./body.js";
import { type ParsedChatRequest, parseChatRequest } from "./mappers/chat.js";
import { type ParsedCompletionRequest, parseCompletionRequest } from "./mappers/completion.js";
import { type ParsedResponsesRequest, parseResponsesRequest } from "./mappers/responses-request.js";

/**
 * What a route may have done to its JSON body besides parsing it, on whichever thread parses
 * it (body-parser.ts): large bodies are parsed and prepared on the body worker, so that
 * neither JSON.parse nor the schema's validation of megabytes holds the event loop.
 * A preparer is named, not passed, because a function cannot cross to a worker thread.
 */
export const BODY_PREPARERS: { [P in keyof AcceptedBodies]: (value: unknown) => PreparedBody<P> } = {
  /** The chat-completion request validated and mapped (a ParsedChatRequest; its requestId is left empty). */
  chat: (value: unknown) => parseChatRequest(value),
  /** The Responses request validated and mapped (a ParsedResponsesRequest; its requestId is left empty). */
  responses: (value: unknown) => parseResponsesRequest(value),
  /** The legacy completions request validated and mapped (a ParsedCompletionRequest; its requestId is left empty). */
  completion: (value: unknown) => parseCompletionRequest(value),
};

/** What each preparer makes of a body it accepts. */
export interface AcceptedBodies {
  chat: Extract<ParsedChatRequest, { ok: true }>;
  responses: Extract<ParsedResponsesRequest, { ok: true }>;
  completion: Extract<ParsedCompletionRequest, { ok: true }>;
}

export type BodyPreparer = keyof AcceptedBodies;

/** `ctx.body` of a route that names preparer `P`: the accepted request, or the error that names the field at fault. */
export type PreparedBody<P extends BodyPreparer> = AcceptedBodies[P] | Extract<ParsedChatRequest, { ok: false }>;

/** Parses a JSON body (body.ts `parseJson`: 400/422 in the FastAPI way) and prepares it. */
export function prepareBody(bytes: Buffer, prepare: BodyPreparer | undefined): unknown {
  const value = parseJson(bytes);
  return prepare === undefined ? value : BODY_PREPARERS[prepare](value);
}
