import { Code, ConnectError } from "@connectrpc/connect";

const BEARER = /^\s*Bearer\s+(\S+)\s*$/i;
const NO_SPACE = /^\S+$/;

/** The Bearer secret of an Authorization header, or undefined when no key was sent. */
export function bearerKey(header: string | null | undefined): string | undefined {
  if (header === undefined || header === null) return undefined;
  // The usual form, exactly `Bearer <key>`, without the general expression's match.
  if (header.startsWith("Bearer ")) {
    const key = header.slice(7);
    if (NO_SPACE.test(key)) return key;
  }
  return BEARER.exec(header)?.[1];
}

/**
 * A call that needs a key came without one. Connect callers see Unauthenticated; the JSON
 * routes answer 403 `missing_api_key`, as the API document says (errors.ts).
 */
export class MissingApiKey extends ConnectError {
  constructor() {
    super("no API key sent; send the header Authorization: Bearer <key>", Code.Unauthenticated);
  }

  // ConnectError's own check accepts any ConnectError (by name); this one wants its own kind.
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(MissingApiKey, value);
  }
}
