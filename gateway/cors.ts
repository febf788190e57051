import type { IncomingMessage } from "node:http";

/**
 * CORS for the origins of TESSERA_CORS_ORIGINS (`*` for any): browsers on those origins may
 * call the API with a key, as the OpenAI SDK does with `dangerouslyAllowBrowser`. A request
 * from an origin not listed gets no CORS header at all, so its browser refuses the answer.
 */

/** Headers a browser client sends: the key, JSON, and the OpenAI and TypeSafe SDKs' own. */
const ALLOW_HEADERS = [
  "authorization",
  "content-type",
  "accept",
  // Firefox sends the User-Agent a page sets (the TypeSafe SDK sets one); Chromium drops it.
  "user-agent",
  "x-typesafe-sdk",
  "x-typesafe-runtime",
  "x-typesafe-retry-count",
  "openai-organization",
  "openai-project",
  "openai-beta",
  "x-stainless-arch",
  "x-stainless-lang",
  "x-stainless-os",
  "x-stainless-package-version",
  "x-stainless-retry-count",
  "x-stainless-runtime",
  "x-stainless-runtime-version",
  "x-stainless-timeout",
  "x-stainless-helper-method",
  "x-stainless-poll-helper",
  "x-stainless-custom-poll-interval",
].join(", ");
const ALLOW_METHODS = "GET, POST, OPTIONS";
/** What a page may read of an answer. */
const EXPOSE_HEADERS = [
  "x-service-request-id",
  "x-request-id",
  "x-typesafe-request-id",
  "retry-after",
  "x-should-retry",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-reset-requests",
].join(", ");
/** How long a browser may keep a preflight's answer: 10 minutes. */
const MAX_AGE_SECONDS = "600";

export interface Cors {
  /** Header pairs for an actual request's answer; empty when the origin is not allowed (or absent). */
  responseHeaders(req: IncomingMessage): string[];
  /** A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin: the 204's headers; else undefined. */
  preflight(req: IncomingMessage): string[] | undefined;
}

/** `origins`: exact origins (`https://app.example.com`) or `*`; empty: CORS off. */
export function createCors(origins: readonly string[]): Cors | undefined {
  if (origins.length === 0) return undefined;
  const any = origins.includes("*");
  const listed = new Set(origins);
  const allowed = (origin: string | undefined): origin is string => origin !== undefined && (any || listed.has(origin));
  // A listed origin is echoed, so caches must tell origins apart.
  const base = (origin: string) => ["access-control-allow-origin", any ? "*" : origin, "vary", "Origin"];
  return {
    responseHeaders(req) {
      const origin = req.headers.origin;
      if (!allowed(origin)) return [];
      return [...base(origin), "access-control-expose-headers", EXPOSE_HEADERS];
    },
    preflight(req) {
      const origin = req.headers.origin;
      if (req.method !== "OPTIONS" || req.headers["access-control-request-method"] === undefined || !allowed(origin)) return undefined;
      return [
        ...base(origin),
        "access-control-allow-methods",
        ALLOW_METHODS,
        "access-control-allow-headers",
        ALLOW_HEADERS,
        "access-control-max-age",
        MAX_AGE_SECONDS,
      ];
    },
  };
}

/**
 * What a preflight that gets no CORS answer is told instead (CORS off, or its origin not listed),
 * so that whoever reads the browser's network panel learns which setting to change.
 */
export function preflightRefusal(origin: string | undefined, enabled: boolean): string {
  const from = origin === undefined ? "a page" : `origin ${JSON.stringify(origin.slice(0, 200))}`;
  return enabled
    ? `CORS preflight refused: ${from} is not listed in TESSERA_CORS_ORIGINS, so browsers on it may not call this API`
    : `CORS preflight refused: browsers may call this API only from the origins listed in TESSERA_CORS_ORIGINS, which is not set on this server (\`*\` allows any)`;
}
