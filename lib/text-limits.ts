/**
 * The limits on a text generation that both the gateway (what the OpenAI-compatible API
 * accepts) and the inference service (what a Generate call over Connect accepts) enforce, in
 * one place so the two cannot drift apart. lib/ so that either may import it.
 */

/** max_tokens when a request names none. */
export const DEFAULT_MAX_TOKENS = 1024;
/** A larger max_tokens is lowered to this. */
export const MAX_TOKENS_CAP = 8192;

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
