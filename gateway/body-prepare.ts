import { parseJson } from "./body.js";
import { type ParsedChatRequest, parseChatRequest } from "./mappers/chat.js";
import { type ParsedCompletionRequest, parseCompletionRequest } from "./mappers/completion.js";
import { type ParsedDecisionRequest, parseDecisionRequest } from "./mappers/decision.js";
import { type ParsedResponsesRequest, parseResponsesRequest } from "./mappers/responses-request.js";

/**
 * What a route may have done to its JSON body besides parsing it, on whichever thread parses
 * it (body-parser.ts): large bodies are parsed and prepared on the body worker, so that
 * neither JSON.parse nor the schema's validation of megabytes holds the event loop.
 * A preparer is named, not passed, because a function cannot cross to a worker thread.
 */
export const BODY_PREPARERS: { [P in TextBodyPreparer]: (value: unknown, bytes: number) => PreparedBody<P> } & {
  decision: (value: unknown, bytes: number) => DecisionBody;
} = {
  /** The chat-completion request validated and mapped (a ParsedChatRequest; its requestId is left empty). */
  chat: (value: unknown) => parseChatRequest(value),
  /** The Responses request validated and mapped (a ParsedResponsesRequest; its requestId is left empty). */
  responses: (value: unknown) => parseResponsesRequest(value),
  /** The legacy completions request validated and mapped (a ParsedCompletionRequest; its requestId is left empty). */
  completion: (value: unknown) => parseCompletionRequest(value),
  /**
   * The decision request checked (state depth and size included: on a multi-megabyte state
   * object that walk and its JSON text cost the event loop a second and more) and mapped, with
   * the body's size; an oversized state never comes back to the main thread, only its 422.
   */
  decision: (value: unknown, bytes: number) => ({ ...parseDecisionRequest(value), bodyBytes: bytes }),
};

/** What each preparer makes of a body it accepts. */
export interface AcceptedBodies {
  chat: Extract<ParsedChatRequest, { ok: true }>;
  responses: Extract<ParsedResponsesRequest, { ok: true }>;
  completion: Extract<ParsedCompletionRequest, { ok: true }>;
}

/** A decision body as its route takes it: the checked request (or its violations) and the body's bytes. */
export type DecisionBody = ParsedDecisionRequest & { bodyBytes: number };

/** The preparers of the text routes (text-generation.ts). */
export type TextBodyPreparer = keyof AcceptedBodies;

export type BodyPreparer = TextBodyPreparer | "decision";

/** `ctx.body` of a route that names preparer `P`: the accepted request, or the error that names the field at fault. */
export type PreparedBody<P extends TextBodyPreparer> = AcceptedBodies[P] | Extract<ParsedChatRequest, { ok: false }>;

/** Parses a JSON body (body.ts `parseJson`: 400/422 in the FastAPI way) and prepares it. */
export function prepareBody(bytes: Buffer, prepare: BodyPreparer | undefined): unknown {
  const value = parseJson(bytes);
  return prepare === undefined ? value : BODY_PREPARERS[prepare](value, bytes.length);
}
