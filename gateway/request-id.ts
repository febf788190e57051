import { randomFillSync } from "node:crypto";

export const REQUEST_ID_HEADER = "x-service-request-id";
/** The same id under the name the OpenAI SDKs read (`_request_id`, `requestID`). */
export const OPENAI_REQUEST_ID_HEADER = "x-request-id";
/** The same id under the name the TypeSafe SDKs read (`requestId`, `request_id`). */
export const TYPESAFE_REQUEST_ID_HEADER = "x-typesafe-request-id";

/** Random bytes for request ids, drawn 256 ids at a time (a draw per id costs more than the rest of the id). */
const idBytes = Buffer.allocUnsafeSlow(4096);
let idOffset = idBytes.length;

/** `req_` and 128 random bits in hex. */
export function newRequestId(): string {
  if (idOffset === idBytes.length) {
    randomFillSync(idBytes);
    idOffset = 0;
  }
  const id = `req_${idBytes.toString("hex", idOffset, idOffset + 16)}`;
  idOffset += 16;
  return id;
}
