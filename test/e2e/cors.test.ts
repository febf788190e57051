// CORS for TESSERA_CORS_ORIGINS, over real HTTP: preflights from listed origins get 204 with
// what the OpenAI SDK sends allowed; answers to them expose the ids and limits; unlisted
// origins get no CORS header at all.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

const APP = "https://app.example.com";
let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "none", env: { TESSERA_CORS_ORIGINS: `${APP}, http://localhost:5173` } });
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

const preflight = (origin: string, path = "/v1/chat/completions") =>
  tessera.fetch(path, {
    method: "OPTIONS",
    key: null,
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type, x-stainless-os, x-stainless-retry-count",
    },
  });

describe("CORS", () => {
  it("answers a listed origin's preflight 204 with origin, methods, headers (x-stainless-* included) and max-age", async () => {
    for (const path of ["/v1/chat/completions", "/v1/responses", "/v1/models", "/v1/models/textmodel-26b"]) {
      const res = await preflight(APP, path);
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe(APP);
      expect(res.headers.get("access-control-allow-methods")).toMatch(/POST/);
      const allowed = res.headers.get("access-control-allow-headers")!.split(/,\s*/);
      for (const header of [
        "authorization",
        "content-type",
        "x-stainless-os",
        "x-stainless-retry-count",
        "x-stainless-timeout",
        "x-typesafe-sdk",
        "x-typesafe-runtime",
        "x-typesafe-retry-count",
        "user-agent",
      ]) {
        expect(allowed).toContain(header);
      }
      expect(Number(res.headers.get("access-control-max-age"))).toBeGreaterThan(0);
      expect(await res.text()).toBe("");
    }
  });

  it("puts allow-origin and expose-headers on actual answers, errors included", async () => {
    const ok = await tessera.fetch("/v1/models", { headers: { origin: APP } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("access-control-allow-origin")).toBe(APP);
    const exposed = ok.headers.get("access-control-expose-headers")!.split(/,\s*/);
    for (const header of [
      "x-service-request-id",
      "x-request-id",
      "x-typesafe-request-id",
      "retry-after",
      "x-should-retry",
      "x-ratelimit-remaining-requests",
    ]) {
      expect(exposed).toContain(header);
    }
    const refused = await tessera.fetch("/v1/models", { key: "tsr_unknown", headers: { origin: "http://localhost:5173" } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
  });

  it("gives an unlisted origin nothing: no CORS header, and its preflight is not allowed", async () => {
    const res = await preflight("https://evil.example");
    expect(res.status).toBe(405);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    // Whoever reads the network panel learns which setting to change.
    expect(((await res.json()) as { error: { message: string; code: string } }).error).toMatchObject({
      code: "cors_not_allowed",
      message: expect.stringMatching(/"https:\/\/evil\.example" is not listed in TESSERA_CORS_ORIGINS/),
    });
    const get = await tessera.fetch("/v1/models", { headers: { origin: "https://evil.example" } });
    expect(get.status).toBe(200);
    expect(get.headers.get("access-control-allow-origin")).toBeNull();
    expect(get.headers.get("access-control-expose-headers")).toBeNull();
  });

  it("every answer carries x-request-id and x-typesafe-request-id equal to x-service-request-id", async () => {
    for (const res of [await tessera.fetch("/v1/models"), await tessera.fetch("/v1/nothing"), await tessera.fetch("/healthz")]) {
      expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
      expect(res.headers.get("x-request-id")).toBe(res.headers.get("x-service-request-id"));
      expect(res.headers.get("x-typesafe-request-id")).toBe(res.headers.get("x-service-request-id"));
    }
  });
});
