import { once } from "node:events";
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ClientDisconnected, createSseWriter, StreamStalled, type SseWriter, type SseWriterOptions } from "./sse.js";

type Handler = (sse: SseWriter, res: ServerResponse, req: IncomingMessage) => Promise<void> | void;

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A real HTTP server on port 0 whose handler gets an SSE writer. */
async function serve(handler: Handler, options: SseWriterOptions = {}): Promise<{ url: string; port: number; failures: unknown[] }> {
  const failures: unknown[] = [];
  const server = createServer((req, res) => {
    res.setHeader("x-service-request-id", "req_test");
    Promise.resolve(handler(createSseWriter(res, options), res, req)).catch((err: unknown) => failures.push(err));
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, port, failures };
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("SSE writer", () => {
  it("sends the SSE headers, data events and [DONE], keeping headers set before", async () => {
    const { url } = await serve(async (sse) => {
      expect(sse.opened).toBe(false);
      expect(await sse.send({ n: 1, text: "two\nlines" })).toBe(true);
      expect(sse.opened).toBe(true);
      expect(await sse.send({ n: 2 })).toBe(true);
      await sse.done();
      expect(sse.closed).toBe(true);
      expect(await sse.send({ n: 3 })).toBe(false);
    });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("connection")).toBe("keep-alive");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    expect(res.headers.get("x-service-request-id")).toBe("req_test");
    expect(await res.text()).toBe('data: {"n":1,"text":"two\\nlines"}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');
  });

  it("ends a failed stream with an error event and no [DONE]", async () => {
    const { url } = await serve(async (sse) => {
      await sse.send({ n: 1 });
      await sse.fail({ message: "the model failed", type: "api_error", code: "model_error" });
    });
    const res = await fetch(url);
    expect(await res.text()).toBe(
      'data: {"n":1}\n\ndata: {"error":{"message":"the model failed","type":"api_error","code":"model_error"}}\n\n',
    );
  });

  it("can fail before anything was sent: the stream opens with the error event", async () => {
    const { url } = await serve((sse) => sse.fail({ message: "boom", type: "api_error", code: null }));
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('data: {"error":{"message":"boom","type":"api_error","code":null}}\n\n');
  });

  it("aborts its signal when the client disconnects, and send then answers false", async () => {
    const aborted = deferred<unknown>();
    const afterAbort = deferred<boolean>();
    const { url } = await serve(async (sse) => {
      sse.signal.addEventListener("abort", () => aborted.resolve(sse.signal.reason));
      await sse.send({ hello: true });
      await aborted.promise;
      afterAbort.resolve(await sse.send({ again: true }));
    });
    const controller = new AbortController();
    const res = await fetch(url, { signal: controller.signal });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe('data: {"hello":true}\n\n');
    controller.abort();
    expect(await aborted.promise).toBeInstanceOf(ClientDisconnected);
    expect(await afterAbort.promise).toBe(false);
  });

  it("does not abort when the stream ends normally", async () => {
    const state = deferred<boolean>();
    const { url } = await serve(async (sse) => {
      await sse.send({ a: 1 });
      await sse.done();
      setTimeout(() => state.resolve(sse.signal.aborted), 50);
    });
    await (await fetch(url)).text();
    expect(await state.promise).toBe(false);
  });

  it("sends keep-alive comments while idle", async () => {
    const { url } = await serve(
      async (sse) => {
        sse.open();
        await new Promise((r) => setTimeout(r, 130));
        await sse.done();
      },
      { heartbeatMs: 40 },
    );
    const text = await (await fetch(url)).text();
    expect(text).toMatch(/^(: keep-alive\n\n){2,}data: \[DONE\]\n\n$/);
  });
});

describe("SSE writer: back-pressure", () => {
  const bigEvent = { text: "x".repeat(256 * 1024) };

  /** A raw HTTP client that stops reading after the headers. */
  async function pausedClient(port: number) {
    const socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    socket.pause();
    return socket;
  }

  it("waits for a slow reader instead of buffering without bound, then goes on", async () => {
    const blocked = deferred<number>();
    const finished = deferred<number>();
    const { port } = await serve(
      async (sse, res) => {
        let sent = 0;
        // Fill the socket until a send has to wait for the client.
        for (;;) {
          const pending = sse.send(bigEvent);
          const state = await Promise.race([pending, new Promise((r) => setTimeout(() => r("waiting"), 200))]);
          sent++;
          if (state === "waiting") {
            blocked.resolve(res.writableLength);
            expect(await pending).toBe(true);
            break;
          }
          if (sent > 2000) throw new Error("never blocked");
        }
        await sse.done();
        finished.resolve(sent);
      },
      { stallTimeoutMs: 10_000, heartbeatMs: 0 },
    );
    const socket = await pausedClient(port);
    const buffered = await blocked.promise;
    // What Node holds for this response stays around one event, not everything sent.
    expect(buffered).toBeLessThan(2 * 1024 * 1024);
    let received = 0;
    socket.on("data", (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    const sent = await finished.promise;
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    expect(sent).toBeGreaterThan(1);
    expect(received).toBeGreaterThan(sent * bigEvent.text.length);
  });

  it("drops a client that reads nothing for the stall timeout and aborts the signal", async () => {
    const outcome = deferred<{ ok: boolean; reason: unknown; waitedMs: number }>();
    const { port } = await serve(
      async (sse) => {
        for (let i = 0; i < 2000; i++) {
          const started = Date.now();
          const ok = await sse.send(bigEvent);
          if (!ok) {
            outcome.resolve({ ok, reason: sse.signal.reason, waitedMs: Date.now() - started });
            return;
          }
        }
        throw new Error("never stalled");
      },
      { stallTimeoutMs: 300, heartbeatMs: 0 },
    );
    const socket = await pausedClient(port);
    const closed = once(socket, "close");
    const { ok, reason, waitedMs } = await outcome.promise;
    expect(ok).toBe(false);
    expect(reason).toBeInstanceOf(StreamStalled);
    expect(waitedMs).toBeGreaterThanOrEqual(290);
    expect(waitedMs).toBeLessThan(5_000);
    // The server cut the connection: once the client reads what it had, the socket ends.
    socket.resume();
    await closed;
  });

  it("bounds the final flush too: a stalled client cannot hold done()", async () => {
    const result = deferred<{ ms: number; reason: unknown }>();
    const { port } = await serve(
      async (sse) => {
        // Fill the buffer without waiting, then end.
        while (!sse.closed) {
          const ok = await Promise.race([sse.send(bigEvent), new Promise((r) => setTimeout(() => r("waiting"), 100))]);
          if (ok === "waiting") break;
        }
        const started = Date.now();
        await sse.done();
        result.resolve({ ms: Date.now() - started, reason: sse.signal.reason });
      },
      { stallTimeoutMs: 300, heartbeatMs: 0 },
    );
    const socket = await pausedClient(port);
    const { ms, reason } = await result.promise;
    socket.destroy();
    expect(ms).toBeLessThan(5_000);
    expect(reason).toBeInstanceOf(StreamStalled);
  });
});

describe("SSE writer over a plain node:http client", () => {
  it("delivers events as they are sent, not at the end", async () => {
    const release = deferred();
    const { port } = await serve(async (sse) => {
      await sse.send({ first: true });
      await release.promise;
      await sse.done();
    });
    const res = await new Promise<IncomingMessage>((resolve) => httpRequest({ port, host: "127.0.0.1", path: "/" }, resolve).end());
    const [chunk] = (await once(res, "data")) as [Buffer];
    expect(chunk.toString()).toBe('data: {"first":true}\n\n');
    release.resolve();
    let rest = "";
    for await (const more of res) rest += String(more);
    expect(rest).toBe("data: [DONE]\n\n");
  });
});
