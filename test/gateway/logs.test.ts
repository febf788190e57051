import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
});
afterAll(async () => {
  await tessera?.close();
});

interface RequestLine {
  msg: string;
  level: string;
  reqId: string;
  keyId?: string;
  route: string;
  status: number;
  latencyMs: number;
  method: string;
  model?: string;
}

function requestLines(logs: string[]): RequestLine[] {
  return logs.map((line) => JSON.parse(line) as RequestLine).filter((l) => l.msg === "request");
}

async function settleLogs() {
  // The line is written when the response closes, just after the client has it.
  await new Promise((resolve) => setTimeout(resolve, 50));
}

describe("request logs", () => {
  it("writes one JSON line per request with request id, key id, route, status and latency, never the key", async () => {
    tessera.announceWorker();
    const key = await tessera.createKey();
    const ok = await tessera.fetch("/v1/models", { key: key.apiKey });
    const denied = await tessera.fetch("/v1/models", { key: `${key.apiKey}x` });
    const decision = await tessera.fetch("/v1/systemone", {
      key: key.apiKey,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } } }),
    });
    await settleLogs();
    const lines = requestLines(tessera.logs);
    const byId = (res: Response) => lines.filter((l) => l.reqId === res.headers.get("x-service-request-id"));

    const [okLine] = byId(ok);
    expect(byId(ok)).toHaveLength(1);
    expect(okLine).toMatchObject({ level: "info", keyId: key.keyId, route: "/v1/models", method: "GET", status: 200 });
    expect(okLine!.latencyMs).toBeGreaterThan(0);

    expect(byId(denied)[0]).toMatchObject({ route: "/v1/models", status: 401 });
    expect(byId(denied)[0]!.keyId).toBeUndefined();
    expect(byId(decision)[0]).toMatchObject({ route: "/v1/systemone", model: "jev-latest", keyId: key.keyId });

    const everything = tessera.logs.join("\n");
    for (const secret of [key.apiKey, tessera.key]) {
      expect(everything).not.toContain(secret);
      expect(everything).not.toContain(secret.slice(4));
    }
  });

  it("logs probes and scrapes at debug level", async () => {
    const res = await tessera.fetch("/healthz", { key: null });
    await settleLogs();
    const line = requestLines(tessera.logs).find((l) => l.reqId === res.headers.get("x-service-request-id"));
    expect(line).toMatchObject({ level: "debug", route: "/healthz", status: 200 });
  });
});
