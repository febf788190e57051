import { Agent, request } from "node:http";
import { connect } from "node:net";

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface SendOptions {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** A request that gets no complete answer within this time fails the caller. Default 15 s. */
  timeoutMs?: number;
}

/** Requests one after another over one keep-alive connection (reopened when the server closes it). */
export function keepAliveClient(baseUrl: string) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    send({ method = "GET", path, headers = {}, body, timeoutMs = 15_000 }: SendOptions): Promise<Reply> {
      return new Promise((resolve, reject) => {
        // node's client sends a DELETE or OPTIONS body without Content-Length unless told.
        const length = body === undefined ? {} : { "content-length": String(body.length) };
        const req = request(`${baseUrl}${path}`, { method, headers: { ...length, ...headers }, agent });
        const timer = setTimeout(() => {
          req.destroy();
          reject(new Error(`no complete answer to ${method} ${path.slice(0, 100)} within ${timeoutMs} ms`));
        }, timeoutMs);
        req.on("response", (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            clearTimeout(timer);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          });
          res.on("error", (err) => {
            clearTimeout(timer);
            reject(err);
          });
        });
        req.on("error", (err) => {
          clearTimeout(timer);
          reject(err);
        });
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}

export interface RawReply extends Reply {
  /** The connection was closed by the server without any answer. */
  closedWithoutAnswer: boolean;
}

/**
 * Writes `bytes` as is on a new connection and reads until the server closes it or a whole
 * answer (headers + content-length bytes) has arrived. For what node's client refuses to
 * send: junk header bytes, broken request lines, lying Content-Length.
 */
export function rawExchange(port: number, bytes: Buffer, options: { timeoutMs?: number; endAfterWrite?: boolean } = {}): Promise<RawReply> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) return reject(err);
      resolve(parseReply(Buffer.concat(chunks)));
    };
    const timer = setTimeout(
      () => finish(new Error(`no answer within ${timeoutMs} ms to ${bytes.subarray(0, 80).toString("latin1")}`)),
      timeoutMs,
    );
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      if (complete(Buffer.concat(chunks))) finish();
    });
    socket.on("end", () => finish());
    socket.on("close", () => finish());
    // A reset after the answer (the server closes with unread input) is not a failure.
    socket.on("error", () => finish());
    socket.write(bytes, () => {
      if (options.endAfterWrite === true) socket.end();
    });
  });
}

function headerEnd(data: Buffer): number {
  return data.indexOf("\r\n\r\n");
}

function complete(data: Buffer): boolean {
  const end = headerEnd(data);
  if (end < 0) return false;
  const head = data.subarray(0, end).toString("latin1");
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
  if (length === undefined) return false;
  return data.length >= end + 4 + Number(length);
}

export function parseReply(data: Buffer): RawReply {
  const end = headerEnd(data);
  if (end < 0) return { status: 0, headers: {}, body: data, closedWithoutAnswer: true };
  const [statusLine, ...lines] = data.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = headers["content-length"];
  const body = data.subarray(end + 4, length === undefined ? undefined : end + 4 + Number(length));
  return { status, headers, body, closedWithoutAnswer: false };
}
