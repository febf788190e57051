/**
 * The limits on a text generation that both the gateway (what the OpenAI-compatible API
 * accepts) and the inference service (what a Generate call over Connect accepts) enforce, in
 * one place so the two cannot drift apart. lib/ so that either may import it.
 */

/** max_tokens when a request names none. */
export const DEFAULT_MAX_TOKENS = 1024;
/** A larger max_tokens is lowered to this. */
export const MAX_TOKENS_CAP = 8192;

/** Where a caller's max_tokens default and cap differ from DEFAULT_MAX_TOKENS and MAX_TOKENS_CAP (OpenAI's completions default to 16). */
export interface MaxTokensDefaults {
  /** max_tokens when the request names none (or 0). */
  maxTokens?: number;
  /** A larger max_tokens is lowered to this. */
  maxTokensCap?: number;
}

/**
 * A generation's max_tokens, the one rule (vLLM's get_max_tokens): unset or 0 is the default, a
 * larger one is lowered to the cap, and, once the prompt's tokens are known, it is no more than
 * the context leaves. The engine resolves it once per request with the context and passes the
 * result down; the gateway fills the API's default into the request, and sizes quota holds, by it.
 */
export function resolveMaxTokens(
  requested: number | null | undefined,
  defaults: MaxTokensDefaults = {},
  context?: { promptTokens: number; maxPositions: number },
): number {
  const asked = requested !== null && requested !== undefined && requested > 0 ? requested : (defaults.maxTokens ?? DEFAULT_MAX_TOKENS);
  const wanted = Math.min(asked, defaults.maxTokensCap ?? MAX_TOKENS_CAP);
  return context === undefined ? wanted : Math.min(wanted, context.maxPositions - context.promptTokens);
}

/** OpenAI's most alternatives per token (`top_logprobs`). */
export const MAX_TOP_LOGPROBS = 20;

/** Stop sequences an HTTP request may send: OpenAI's limit on `stop`, which its clients expect. */
export const MAX_HTTP_STOP_SEQUENCES = 4;
/**
 * Stop sequences one Generate call may carry: looser than the HTTP API's, for Connect callers
 * that are not the gateway (a few short sequences, as OpenAI-style clients send them).
 */
export const MAX_GENERATE_STOP_SEQUENCES = 16;
/** Characters of one stop sequence in a Generate call. */
export const MAX_GENERATE_STOP_CHARS = 500;
