import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { playgroundDir } from "../../lib/package-root.js";
import { HttpError } from "../errors.js";
import type { Route } from "../route.js";

/** The page may load nothing but its own files from this server, and may not be framed. */
export const PLAYGROUND_CSP = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS: { path: string; file: string; type: string }[] = [
  { path: "/", file: "index.html", type: "text/html; charset=utf-8" },
  { path: "/playground/app.js", file: "app.js", type: "text/javascript; charset=utf-8" },
  { path: "/playground/app.css", file: "app.css", type: "text/css; charset=utf-8" },
  { path: "/playground/favicon.svg", file: "favicon.svg", type: "image/svg+xml" },
];

interface Asset {
  bytes: Buffer;
  etag: string;
}

/**
 * GET / and the playground's assets: the page `npm run build` bundled into dist/playground
 * (web/build.ts), read once and served from memory, without a key. Every answer carries a
 * strict Content-Security-Policy; an unchanged file answers 304 to its ETag. A build that is
 * missing (sources run without `npm run build`) is 503 saying so.
 */
export function playgroundRoutes(dir = playgroundDir(import.meta.dirname)): Route[] {
  return ASSETS.map(({ path, file, type }) => {
    let asset: Asset | undefined;
    const load = (): Asset | undefined => {
      if (asset !== undefined) return asset;
      try {
        const bytes = readFileSync(join(dir, file));
        asset = { bytes, etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 22)}"` };
      } catch {
        return undefined;
      }
      return asset;
    };
    load();
    return {
      method: "GET",
      path,
      errorStyle: "detail",
      body: "none",
      logLevel: "debug",
      handle(ctx) {
        const found = load();
        if (found === undefined) {
          throw new HttpError(
            503,
            "api_error",
            "the playground page is not built: run `npm run build` (or turn it off with TESSERA_PLAYGROUND=off)",
            {
              code: "playground_not_built",
            },
          );
        }
        const headers = {
          "content-type": type,
          "content-security-policy": PLAYGROUND_CSP,
          "x-content-type-options": "nosniff",
          "referrer-policy": "no-referrer",
          "cache-control": "no-cache",
          etag: found.etag,
        };
        if (ctx.req.headers["if-none-match"] === found.etag) {
          ctx.res.writeHead(304, headers);
          ctx.res.end();
        } else {
          ctx.res.writeHead(200, { ...headers, "content-length": found.bytes.length });
          ctx.res.end(found.bytes);
        }
        return undefined;
      },
    };
  });
}
