// The playground's routes on the bare gateway: GET / and its assets as `npm run build` wrote
// them (web/build.ts), without a key, each with a strict CSP; ETag and 304; HEAD; a method other
// than GET; a build that is missing (503 saying so); TESSERA_PLAYGROUND=off (no route at all).
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PLAYGROUND_CSP, playgroundRoutes } from "../../gateway/routes/playground.js";
import { createRoutes } from "../../gateway/routes/index.js";
import { loadConfig } from "../../lib/config.js";
import { buildPlayground, PLAYGROUND_FILES } from "../../web/build.js";
import { useBareGateway } from "../helpers/bare-gateway.js";

const built = mkdtempSync(join(tmpdir(), "tessera-playground-"));
const gateway = useBareGateway({ routes: playgroundRoutes(built), accounting: {} as never });
const unbuilt = useBareGateway({ routes: playgroundRoutes(join(built, "nothing-here")), accounting: {} as never });

beforeAll(async () => {
  await buildPlayground(built);
});

const ASSETS = [
  { path: "/", file: "index.html", type: "text/html; charset=utf-8" },
  { path: "/playground/app.js", file: "app.js", type: "text/javascript; charset=utf-8" },
  { path: "/playground/app.css", file: "app.css", type: "text/css; charset=utf-8" },
  { path: "/playground/favicon.svg", file: "favicon.svg", type: "image/svg+xml" },
];

describe("playground routes", () => {
  it("serve the page and each asset without a key, with a strict CSP, nosniff and a request id", async () => {
    for (const { path, file, type } of ASSETS) {
      const res = await fetch(`${gateway.base}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toBe(type);
      expect(res.headers.get("content-security-policy")).toBe(PLAYGROUND_CSP);
      expect(PLAYGROUND_CSP.startsWith("default-src 'self';")).toBe(true);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("x-service-request-id")).toMatch(/^req_/);
      expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(built, file)))).toBe(true);
    }
    expect(PLAYGROUND_FILES.length).toBe(ASSETS.length);
  });

  it("the built page names only its own server's paths: no other origin, no inline script or style", () => {
    const html = readFileSync(join(built, "index.html"), "utf8");
    expect(html).toContain('<script type="module" src="/playground/app.js"></script>');
    expect(html).not.toMatch(/<script>|<style|\sstyle="|\son[a-z]+="/);
    for (const file of ["index.html", "app.js", "app.css"]) {
      expect(readFileSync(join(built, file), "utf8"), file).not.toMatch(/https?:\/\/|\/\/cdn|@import/);
    }
    // The bundle never parses markup: model text becomes text nodes only.
    expect(readFileSync(join(built, "app.js"), "utf8")).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  it("answers 304 to the ETag of the file it has, and HEAD without a body", async () => {
    const first = await fetch(`${gateway.base}/playground/app.js`);
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    const again = await fetch(`${gateway.base}/playground/app.js`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
    const head = await fetch(`${gateway.base}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  it("refuses another method with 405 and other paths under /playground with 404", async () => {
    const post = await fetch(`${gateway.base}/`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toContain("GET");
    expect((await fetch(`${gateway.base}/playground/../package.json`)).status).toBe(404);
    expect((await fetch(`${gateway.base}/playground/build.js`)).status).toBe(404);
  });

  it("a missing build is 503 saying how to build it", async () => {
    const res = await fetch(`${unbuilt.base}/`);
    expect(res.status).toBe(503);
    const body = (await res.json()) as { detail: { message: string } };
    expect(body.detail.message).toContain("npm run build");
  });

  it("TESSERA_PLAYGROUND: on by default; off leaves / unrouted; anything else stops the start", () => {
    expect(loadConfig({ env: {} }).gateway.playground).toBe(true);
    expect(loadConfig({ env: { TESSERA_PLAYGROUND: "off" } }).gateway.playground).toBe(false);
    expect(() => loadConfig({ env: { TESSERA_PLAYGROUND: "maybe" } })).toThrow(/TESSERA_PLAYGROUND/);
    const deps = {
      registry: {} as never,
      decision: {} as never,
      inferenceFor: (() => undefined) as never,
      metrics: {} as never,
      readiness: [],
    };
    const paths = (playground?: boolean) =>
      createRoutes({ ...deps, ...(playground === undefined ? {} : { playground }) }).map((r) => r.path);
    expect(paths()).toContain("/");
    expect(paths(true)).toContain("/playground/app.js");
    expect(paths(false).filter((p) => p === "/" || p.startsWith("/playground"))).toEqual([]);
  });
});
