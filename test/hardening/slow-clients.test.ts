// Hostile clients against a real server (in this process, short timeouts): slowloris headers,
// slow bodies, too many connections, requests past their deadline, streams read slowly or
// never, and image URLs that must never be fetched.
import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeInferenceWorker, type FakeWorker } from "../helpers/fake-worker.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { createFakeInferenceWorker, type FakeInferenceOptions, type FakeInferenceWorker } from "./fake-inference.js";
import { parseReply, rawExchange } from "./http-client.js";
import { REQUEST_ID } from "./shapes.js";

const HEADERS_TIMEOUT_MS = 1_000;
const BODY_TIMEOUT_MS = 2_000;
const DEADLINE_MS = 1_500;
const STALL_MS = 1_000;

interface Hardened {
  tessera: TestTessera;
  fake: FakeInferenceWorker;
  worker: FakeWorker;
  port: number;
  close(): Promise<void>;
}

/** A Tessera whose text model is served by a fake remote worker with real slots. */
async function startHardened(env: Record<string, string>, fakeOptions: FakeInferenceOptions): Promise<Hardened> {
  const tessera = await startTestTessera({ models: "none", env: { TESSERA_DEFAULT_RPM: "1000000", ...env } });
  const fake = createFakeInferenceWorker(fakeOptions);
  const worker = await startFakeInferenceWorker(fake.impl);
  tessera.announceWorker({ id: "fake-worker", address: worker.url, slotsTotal: fake.slots.total, slotsFree: fake.slots.total });
  return {
    tessera,
    fake,
    worker,
    port: tessera.port,
    close: async () => {
      await tessera.close();
      await worker.close();
    },
  };
}

let h: Hardened;

beforeAll(async () => {
  h = await startHardened(
    {
      TESSERA_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      TESSERA_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
      TESSERA_REQUEST_DEADLINE_MS: String(DEADLINE_MS),
      TESSERA_STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
    },
    // One slot, so every test can check that it is free again; big deltas to fill socket buffers.
    { slots: 1, queue: 4, deltas: 100_000, deltaChars: 4096 },
  );
});
afterAll(async () => {
  await h?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(20);
  }
  return Date.now() - started;
}

/**
 * A raw connection that records when the server closed it and, unless `reads` is "manual",
 * reads everything: `keep` bytes of it are kept (the answer's head), the rest only counted.
 */
function rawConnection(port: number, options: { reads?: "flowing" | "manual"; keep?: number } = {}) {
  const socket = connect(port, "127.0.0.1");
  const keep = options.keep ?? 64 * 1024;
  const state = { data: Buffer.alloc(0), received: 0, closedAt: 0, openedAt: Date.now() };
  if (options.reads !== "manual") {
    socket.on("data", (chunk: Buffer) => {
      state.received += chunk.length;
      if (state.data.length < keep) state.data = Buffer.concat([state.data, chunk.subarray(0, keep - state.data.length)]);
    });
  }
  socket.on("close", () => (state.closedAt = Date.now()));
  socket.on("error", () => undefined);
  return { socket, state };
}

function chatBody(extra: Record<string, unknown> = {}) {
  return JSON.stringify({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }], ...extra });
}

function chatRequest(body: string): string {
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${h.tessera.key}\r\n` +
    `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

function expectDetail408(data: Buffer): void {
  const reply = parseReply(data);
  expect(reply.status).toBe(408);
  expect(reply.headers["x-service-request-id"]).toMatch(REQUEST_ID);
  expect(JSON.parse(reply.body.toString())).toEqual({
    detail: { error_type: "invalid_request_error", message: "the request was not received in time; the connection is closed" },
    error: {
      message: "the request was not received in time; the connection is closed",
      type: "invalid_request_error",
      code: expect.any(String),
      param: null,
    },
  });
}

describe("slow senders", () => {
  it("cuts off slowloris headers (one byte every 200 ms) after the headers timeout with 408", async () => {
    const { socket, state } = rawConnection(h.port);
    socket.write("GET /v1/models HTTP/1.1\r\nhost: x\r\n");
    const header = `x-slow: ${"a".repeat(100)}`;
    for (let i = 0; i < header.length && state.closedAt === 0; i++) {
      socket.write(header[i]!);
      await sleep(200);
    }
    expect(state.closedAt).toBeGreaterThan(0);
    const lasted = state.closedAt - state.openedAt;
    expect(lasted).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(lasted).toBeLessThan(HEADERS_TIMEOUT_MS + 1_000);
    expectDetail408(state.data);
  });

  it("closes a connection that sends nothing at all after the headers timeout", async () => {
    const { state } = rawConnection(h.port);
    const waited = await waitFor(() => state.closedAt > 0, HEADERS_TIMEOUT_MS + 2_000);
    expect(waited).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
  });

  it("cuts off a body sent one byte every 100 ms after the body timeout with 408, and the server stays free", async () => {
    const body = chatBody({ padding: "p".repeat(200) });
    const head = chatRequest(body).slice(0, -body.length);
    const { socket, state } = rawConnection(h.port);
    socket.write(head);
    for (let i = 0; i < body.length && state.closedAt === 0; i++) {
      socket.write(body[i]!);
      await sleep(100);
    }
    expect(state.closedAt).toBeGreaterThan(0);
    const lasted = state.closedAt - state.openedAt;
    expect(lasted).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
    expect(lasted).toBeLessThan(BODY_TIMEOUT_MS + 1_000);
    expectDetail408(state.data);
    expect(h.fake.slots.free).toBe(1);
    expect((await h.tessera.fetch("/healthz")).status).toBe(200);
  });
});

describe("a cap on open connections", () => {
  let capped: TestTessera;
  const MAX = 5;

  beforeAll(async () => {
    capped = await startTestTessera({ models: "none", env: { TESSERA_MAX_CONNECTIONS: String(MAX) } });
  });
  afterAll(async () => {
    await capped?.close();
  });

  it(`at ${MAX} open connections, a new one is served and the oldest idle one is closed`, async () => {
    const request = "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
    const open: ReturnType<typeof rawConnection>[] = [];
    for (let i = 0; i < MAX; i++) {
      const conn = rawConnection(capped.port);
      conn.socket.write(request);
      await waitFor(() => conn.state.data.includes("\r\n\r\n"), 2_000);
      expect(parseReply(conn.state.data).status).toBe(200);
      open.push(conn);
    }
    // Every connection is idle (keep-alive, no request in flight): the newcomer gets in.
    const newcomer = rawConnection(capped.port);
    newcomer.socket.write(request);
    await waitFor(() => newcomer.state.data.includes("\r\n\r\n"), 2_000);
    expect(parseReply(newcomer.state.data).status).toBe(200);
    // The oldest idle connection was closed for it; the others still work (keep-alive).
    await waitFor(() => open[0]!.state.closedAt > 0, 2_000);
    open[1]!.state.data = Buffer.alloc(0);
    open[1]!.socket.write(request);
    await waitFor(() => open[1]!.state.data.includes("\r\n\r\n"), 2_000);
    expect(parseReply(open[1]!.state.data).status).toBe(200);

    newcomer.socket.destroy();
    await sleep(100);
    const metrics = await rawExchange(capped.port, Buffer.from("GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"));
    expect(metrics.status).toBe(200);
    expect(metrics.body.toString()).toMatch(/tessera_http_connections_evicted_total\{cap="total"\} [1-9]/);
    for (const conn of open) conn.socket.destroy();
  });
});

describe("a deadline per request", () => {
  it("answers 504 when a request is still waiting after the deadline, and withdraws it from the slot queue", async () => {
    // A stream holds the only slot; a second request waits in the worker's queue.
    const holder = rawConnection(h.port, { keep: 0 });
    holder.socket.write(chatRequest(chatBody({ stream: true, max_tokens: 100_000 })));
    await waitFor(() => h.fake.slots.free === 0, 2_000);

    const started = Date.now();
    const res = await h.tessera.fetch("/v1/chat/completions", {
      method: "POST",
      body: chatBody({ max_tokens: 2 }),
      headers: { "content-type": "application/json" },
    });
    const waited = Date.now() - started;
    expect(res.status).toBe(504);
    expect(waited).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(waited).toBeLessThan(DEADLINE_MS + 1_000);
    expect(res.headers.get("x-service-request-id")).toMatch(REQUEST_ID);
    expect(await res.json()).toEqual({
      error: {
        message: `the request took longer than ${DEADLINE_MS} ms before its answer started; its work was cancelled`,
        type: "api_error",
        code: "timeout",
        param: null,
      },
    });
    // The cancelled request left the worker's queue: it never starts.
    await waitFor(() => h.fake.slots.queued === 0, 2_000);
    const before = h.fake.counts.started;
    holder.socket.destroy();
    await waitFor(() => h.fake.slots.free === 1, 2_000);
    await sleep(100);
    expect(h.fake.counts.started).toBe(before);
  });

  it("does not cut a stream that started before the deadline", async () => {
    const res = await h.tessera.fetch("/v1/chat/completions", {
      method: "POST",
      body: chatBody({ stream: true, max_tokens: 3 }),
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/data: \[DONE\]\n\n$/);
  });
});

describe("clients that read a stream slowly or never", () => {
  it("drops a stream whose client reads nothing after the stall timeout and frees its slot, buffering a bounded amount", async () => {
    const cancelledBefore = h.fake.counts.cancelled;
    const charsBefore = h.fake.counts.contentChars;
    // What the gateway itself holds for the client: its response's buffer, sampled all along.
    let gatewayBuffered = 0;
    const responses: ServerResponse[] = [];
    const track = (_req: unknown, res: ServerResponse) => responses.push(res);
    h.tessera.server.on("request", track);
    const sampler = setInterval(() => {
      for (const res of responses) gatewayBuffered = Math.max(gatewayBuffered, res.writableLength);
    }, 5);
    const { socket, state } = rawConnection(h.port, { reads: "manual" });
    socket.write(chatRequest(chatBody({ stream: true, max_tokens: 100_000 })));
    // Never reads: the client's buffers fill, then the kernel's, then the server's.
    await waitFor(() => h.fake.slots.free === 0, 2_000);

    // The generation runs ahead only as far as the buffers on the way let it, then waits.
    const freed = await waitFor(() => h.fake.slots.free === 1, STALL_MS + 5_000);
    clearInterval(sampler);
    h.tessera.server.off("request", track);
    expect(h.fake.counts.cancelled).toBe(cancelledBefore + 1);
    // The gateway never queues more than its high-water mark (16 KiB) and the event that crossed it.
    expect(responses).toHaveLength(1);
    expect(gatewayBuffered).toBeGreaterThan(0);
    expect(gatewayBuffered).toBeLessThan(16 * 1024 + 8 * 1024);
    const produced = h.fake.counts.contentChars - charsBefore;
    // 100,000 deltas of 4 KiB were asked for (400 MiB); what was made is what fit in the buffers.
    expect(produced).toBeLessThan(32 * 1024 * 1024);
    expect(freed).toBeLessThan(STALL_MS + 4_000);
    console.log(
      `stalled stream: ${(produced / 1024 / 1024).toFixed(1)} MiB generated before the drop (kernel socket buffers and HTTP/2 windows), ` +
        `at most ${(gatewayBuffered / 1024).toFixed(1)} KiB queued in the gateway, slot free ${freed} ms after the stream began (stall timeout ${STALL_MS} ms)`,
    );
    socket.resume();
    await waitFor(() => state.closedAt > 0, 5_000);
    expect(state.received).toBe(0);

    // The slot serves the next request.
    const next = await h.tessera.fetch("/v1/chat/completions", {
      method: "POST",
      body: chatBody({ stream: true, max_tokens: 2 }),
      headers: { "content-type": "application/json" },
    });
    expect(next.status).toBe(200);
    expect(await next.text()).toMatch(/data: \[DONE\]\n\n$/);
  });

  it("paces the generation to a slow reader without dropping it or buffering without bound", async () => {
    const deltas = 400; // 400 × 4 KiB = 1.6 MiB, read 64 KiB every 50 ms
    const charsBefore = h.fake.counts.contentChars;
    const { socket, state } = rawConnection(h.port, { reads: "manual" });
    let received = 0;
    let maxAhead = 0;
    let tail = Buffer.alloc(0);
    socket.write(chatRequest(chatBody({ stream: true, max_tokens: deltas })));
    const deadline = Date.now() + 30_000;
    while (state.closedAt === 0 && !tail.includes("[DONE]") && Date.now() < deadline) {
      await sleep(50);
      let read = 0;
      while (read < 64 * 1024) {
        const chunk = socket.read() as Buffer | null;
        if (chunk === null) break;
        tail = Buffer.concat([tail, chunk]).subarray(-256);
        read += chunk.length;
      }
      received += read;
      maxAhead = Math.max(maxAhead, h.fake.counts.contentChars - charsBefore - received);
    }
    // Chunked transfer encoding: the last event, then the zero-length chunk.
    expect(tail.toString()).toMatch(/data: \[DONE\]\n\n\r\n0\r\n\r\n$/);
    expect(received).toBeGreaterThan(deltas * 4096);
    // The worker was never more than the buffers' worth ahead of the reader.
    expect(maxAhead).toBeLessThan(24 * 1024 * 1024);
    console.log(
      `slow reader: ${(received / 1024 / 1024).toFixed(1)} MiB read at 64 KiB per 50 ms; the worker was at most ${(maxAhead / 1024 / 1024).toFixed(1)} MiB ahead`,
    );
    socket.destroy();
    await waitFor(() => h.fake.slots.free === 1, 2_000);
  });
});

describe("image_url", () => {
  let images: Server;
  let hits = 0;

  beforeAll(async () => {
    images = createServer((_req, res) => {
      hits++;
      res.end("GIF89a");
    });
    images.listen(0, "127.0.0.1");
    await once(images, "listening");
  });
  afterAll(() => {
    images?.close();
  });

  it("never fetches a remote URL, and accepts only data: URLs up to the size limit", async () => {
    const { port } = images.address() as AddressInfo;
    const urls = [
      `http://127.0.0.1:${port}/cat.png`,
      `https://127.0.0.1:${port}/cat.png`,
      `//127.0.0.1:${port}/cat.png`,
      "file:///etc/passwd",
      `data:text/html;base64,PGgxPg==`,
    ];
    for (const url of urls) {
      const res = await h.tessera.fetch("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "textmodel-26b",
          max_tokens: 1,
          messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }],
        }),
      });
      expect(res.status, url).toBe(400);
      const { error } = (await res.json()) as { error: { message: string; param: string; code: string } };
      expect(error.param).toBe("messages[0].content[0].image_url.url");
      expect(error.message).toMatch(/remote URLs are never fetched/);
    }
    const tooBig = `data:image/png;base64,${"A".repeat(4 * 1024 * 1024)}`;
    const big = await h.tessera.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "textmodel-26b",
        max_tokens: 1,
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: tooBig } }] }],
      }),
    });
    expect(big.status).toBe(400);
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe("string_above_max_length");
    await sleep(200);
    expect(hits).toBe(0);
  });
});
