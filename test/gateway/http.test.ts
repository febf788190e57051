import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
});
afterAll(async () => {
  await tessera?.close();
});

const REQUEST_ID = /^req_[0-9a-f]{32}$/;

/** Sends `total` bytes in chunks with Transfer-Encoding: chunked (no Content-Length) and reads the answer. */
function streamBody(
  url: string,
  path: string,
  key: string,
  total: number,
): Promise<{ status: number; headers: Record<string, unknown>; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const req = request(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    });
    let answered = false;
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body, sent }));
    });
    // The server may cut the connection once it has answered; only an error before the answer counts.
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    req.write("{");
    const pump = () => {
      while (sent < total && !answered) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once("drain", pump);
          return;
        }
      }
      req.end("}");
    };
    pump();
  });
}

describe("routing", () => {
  it("answers an unknown route 404 in JSON with a request id", async () => {
    const res = await tessera.fetch("/v2/nothing", { key: null });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toEqual({
      detail: { error_type: "not_found_error", message: "no route GET /v2/nothing" },
      error: { message: "no route GET /v2/nothing", type: "not_found_error", code: expect.any(String), param: null },
    });

    const chat = await tessera.fetch("/v1/chat/nothing", { method: "POST", key: null });
    expect(chat.status).toBe(404);
    expect(((await chat.json()) as { error: { type: string } }).error.type).toBe("not_found_error");
  });

  it("answers a wrong method 405 with Allow", async () => {
    const res = await tessera.fetch("/v1/models", { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toEqual({
      detail: { error_type: "invalid_request_error", message: "method POST is not allowed on /v1/models" },
      error: { message: "method POST is not allowed on /v1/models", type: "invalid_request_error", code: expect.any(String), param: null },
    });
    const get = await tessera.fetch("/v1/systemone");
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
  });

  it("ignores the query string when routing", async () => {
    tessera.announceWorker();
    const res = await tessera.fetch("/v1/models?limit=5");
    expect(res.status).toBe(200);
  });

  it("gives every response its own request id", async () => {
    const answers = await Promise.all([
      tessera.fetch("/v1/models"),
      tessera.fetch("/v1/models", { key: null }),
      tessera.fetch("/nope"),
      tessera.fetch("/healthz"),
    ]);
    const ids = answers.map((r) => r.headers.get("x-service-request-id"));
    for (const id of ids) expect(id).toMatch(REQUEST_ID);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe("request bodies", () => {
  it("refuses a declared Content-Length over 8 MB with 413 before reading it", async () => {
    const res = await new Promise<{ status: number; body: string; id: unknown }>((resolve, reject) => {
      const req = request(`${tessera.url}/v1/systemone`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${tessera.key}`, "content-length": String(9 * 1024 * 1024) },
      });
      req.on("response", (r) => {
        let body = "";
        r.on("data", (d: Buffer) => (body += d.toString()));
        r.on("end", () => resolve({ status: r.statusCode!, body, id: r.headers["x-service-request-id"] }));
      });
      req.on("error", reject);
      req.write("{"); // the rest never comes: the answer must not wait for it
    });
    expect(res.status).toBe(413);
    expect(res.id).toMatch(REQUEST_ID);
    expect(JSON.parse(res.body)).toEqual({
      detail: { error_type: "invalid_request_error", message: "request body is larger than 8388608 bytes (8 MB)" },
      error: {
        message: "request body is larger than 8388608 bytes (8 MB)",
        type: "invalid_request_error",
        code: expect.any(String),
        param: null,
      },
    });
  });

  it("refuses a streamed body without Content-Length as soon as it passes 8 MB", async () => {
    const res = await streamBody(tessera.url, "/v1/systemone", tessera.key, 12 * 1024 * 1024);
    expect(res.status).toBe(413);
    expect(res.headers["x-service-request-id"]).toMatch(REQUEST_ID);
    expect(JSON.parse(res.body).detail.error_type).toBe("invalid_request_error");
  });

  it("reads a body just under the limit", async () => {
    const res = await streamBody(tessera.url, "/v1/systemone", tessera.key, 8 * 1024 * 1024 - 64 * 1024);
    // Blank JSON: a valid document that is not an object, so validation (not the size) refuses it.
    expect(res.status).toBe(422);
  });

  it("requires application/json (415)", async () => {
    const form = await tessera.fetch("/v1/systemone", {
      method: "POST",
      body: "a=1",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(415);
    expect(await form.json()).toEqual({
      detail: { error_type: "invalid_request_error", message: "Content-Type must be application/json" },
      error: { message: "Content-Type must be application/json", type: "invalid_request_error", code: expect.any(String), param: null },
    });
    const none = await tessera.fetch("/v1/systemone", { method: "POST", body: new Uint8Array([123, 125]) });
    expect(none.status).toBe(415);
    const charset = await tessera.fetch("/v1/systemone", {
      method: "POST",
      body: "[]",
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    expect(charset.status).toBe(422);
  });

  it("answers bad JSON and an empty body with 422 in the FastAPI shape", async () => {
    const bad = await tessera.fetch("/v1/systemone", {
      method: "POST",
      body: '{"model": ',
      headers: { "content-type": "application/json" },
    });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toEqual({
      detail: [{ loc: ["body", 10], msg: "JSON decode error", type: "json_invalid" }],
      error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
    });
    const empty = await tessera.fetch("/v1/systemone", { method: "POST", body: "", headers: { "content-type": "application/json" } });
    expect(await empty.json()).toEqual({
      detail: [{ loc: ["body"], msg: "Field required", type: "missing" }],
      error: expect.objectContaining({ type: "invalid_request_error", code: expect.any(String), message: expect.any(String) }),
    });
    const latin1 = await tessera.fetch("/v1/systemone", {
      method: "POST",
      body: new Uint8Array([0x22, 0xe9, 0x22]),
      headers: { "content-type": "application/json" },
    });
    expect(latin1.status).toBe(422);
  });
});

describe("operations endpoints", () => {
  it("answers /healthz without a key", async () => {
    const res = await tessera.fetch("/healthz", { key: null });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("answers /readyz 503 naming the missing models, the store being fine", async () => {
    const res = await tessera.fetch("/readyz", { key: null });
    expect(res.status).toBe(503);
    const body = (await res.json()) as { status: string; checks: Record<string, string> };
    expect(body.status).toBe("not ready");
    expect(body.checks["store"]).toBe("ok");
    expect(body.checks["models"]).toMatch(/no model loaded/);
  });

  it("exposes Prometheus metrics with the HTTP counter and latency histogram", async () => {
    await tessera.fetch("/v1/models", { key: null });
    const res = await tessera.fetch("/metrics", { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/tessera_http_requests_total\{method="GET",route="\/v1\/models",status="403"\} [1-9]/);
    expect(text).toMatch(/tessera_http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v1\/models",status="403"\}/);
    expect(text).toMatch(/tessera_process_resident_memory_bytes/);
  });

  it("answers HEAD like GET without a body", async () => {
    const res = await tessera.fetch("/healthz", { method: "HEAD", key: null });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
  });
});
