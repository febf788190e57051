import type { ServerResponse } from "node:http";

/**
 * A server-sent-events writer over a node:http response.
 *
 * - `data: <json>\n\n` events, `data: [DONE]\n\n` at the end, or an error event
 *   `data: {"error": {…}}\n\n` and the end when something fails after the stream started
 *   (the OpenAI clients throw that error to their caller). The Responses API's framing:
 *   `event: <type>\ndata: <json>\n\n` events (`sendEvent`), and the end without `[DONE]`.
 * - Back-pressure: when the socket buffer is full, `send` waits for 'drain'. A client that
 *   reads nothing for `stallTimeoutMs` is dropped, so a stalled stream never holds a
 *   generation slot.
 * - `signal` aborts when the client disconnects or stalls: pass it to the generation.
 */

export interface SseWriterOptions {
  /** How long a full buffer may stay full before the stream is dropped. Default 30 s. */
  stallTimeoutMs?: number;
  /** A comment line this often while idle, so proxies keep the stream open. 0: off. Default 15 s. */
  heartbeatMs?: number;
}

export const DEFAULT_STALL_TIMEOUT_MS = 30_000;
export const DEFAULT_HEARTBEAT_MS = 15_000;

export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-accel-buffering": "no",
};

/** The client closed the connection before the stream ended. */
export class ClientDisconnected extends Error {
  constructor() {
    super("the client closed the connection");
    this.name = "ClientDisconnected";
  }
}

/** The client read nothing for too long; its stream was dropped. */
export class StreamStalled extends Error {
  constructor(readonly timeoutMs: number) {
    super(`the client read nothing for ${timeoutMs} ms; the stream was dropped`);
    this.name = "StreamStalled";
  }
}

export interface SseWriter {
  /** Aborts (reason ClientDisconnected or StreamStalled) when the stream can no longer reach the client. */
  readonly signal: AbortSignal;
  /** The status line and headers are sent. */
  readonly opened: boolean;
  /** Nothing more can be written: ended, client gone, or stalled. */
  readonly closed: boolean;
  /** Sends status 200 and the SSE headers (headers set earlier with res.setHeader are kept). */
  open(): void;
  /** Sends one `data:` event (opening the stream if needed); false when the client is gone. */
  send(data: unknown): Promise<boolean>;
  /** Sends `data: [DONE]` and ends the response. */
  done(): Promise<void>;
  /** Sends `data: {"error": error}` and ends the response. */
  fail(error: object): Promise<void>;
  /** Sends one named event, `event: <name>` then its `data:` line (the Responses API's framing). */
  sendEvent(name: string, data: unknown): Promise<boolean>;
  /** Ends the response with nothing more (a stream whose last event says it is the last). */
  finish(): Promise<void>;
}

export function createSseWriter(res: ServerResponse, options: SseWriterOptions = {}): SseWriter {
  const stallTimeoutMs = options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const controller = new AbortController();
  let opened = false;
  let ended = false;
  let heartbeat: NodeJS.Timeout | undefined;

  const abort = (reason: Error): void => {
    stopHeartbeat();
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const stopHeartbeat = (): void => {
    if (heartbeat !== undefined) clearInterval(heartbeat);
    heartbeat = undefined;
  };
  const isClosed = (): boolean => ended || controller.signal.aborted || res.destroyed || res.writableEnded;

  res.once("close", () => {
    stopHeartbeat();
    if (!res.writableFinished) abort(new ClientDisconnected());
  });
  if (res.destroyed) abort(new ClientDisconnected());

  const open = (): void => {
    if (opened || isClosed()) return;
    opened = true;
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    if (heartbeatMs > 0) {
      heartbeat = setInterval(() => {
        // Never add to a buffer the client is not reading.
        if (!isClosed() && !res.writableNeedDrain) res.write(": keep-alive\n\n");
      }, heartbeatMs);
      heartbeat.unref();
    }
  };

  /** Resolves true on 'drain', false when the stream is dropped meanwhile. */
  const drained = (): Promise<boolean> =>
    new Promise((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        res.off("drain", onDrain);
        controller.signal.removeEventListener("abort", onAbort);
        resolve(ok);
      };
      const onDrain = (): void => done(true);
      const onAbort = (): void => done(false);
      const timer = setTimeout(() => {
        abort(new StreamStalled(stallTimeoutMs));
        res.destroy();
        done(false);
      }, stallTimeoutMs);
      res.on("drain", onDrain);
      controller.signal.addEventListener("abort", onAbort, { once: true });
    });

  const write = async (frame: string): Promise<boolean> => {
    if (isClosed()) return false;
    open();
    if (res.write(frame)) return true;
    return drained();
  };

  /** Ends the response and waits until the client has it all (or is dropped for stalling). */
  const end = async (frame: string): Promise<void> => {
    if (isClosed()) return;
    open();
    ended = true;
    stopHeartbeat();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        abort(new StreamStalled(stallTimeoutMs));
        res.destroy();
      }, stallTimeoutMs);
      const settle = (): void => {
        clearTimeout(timer);
        res.off("finish", settle);
        res.off("close", settle);
        resolve();
      };
      res.once("finish", settle);
      res.once("close", settle);
      res.end(frame);
    });
  };

  return {
    signal: controller.signal,
    get opened() {
      return opened;
    },
    get closed() {
      return isClosed();
    },
    open,
    send: (data: unknown) => write(`data: ${JSON.stringify(data)}\n\n`),
    done: () => end("data: [DONE]\n\n"),
    fail: (error: object) => end(`data: ${JSON.stringify({ error })}\n\n`),
    sendEvent: (name: string, data: unknown) => write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`),
    finish: () => end(""),
  };
}
