import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// While `tessera serve --model` pulls or converts, the port it will serve on answers already:
// /healthz 200, /readyz 503 naming the phase (as the real /readyz names what is not ready),
// anything else 503 with Retry-After. It closes just before the server proper listens.

export interface PullStatusServer {
  url: string;
  close(): Promise<void>;
}

export async function startPullStatusServer(host: string, port: number, status: () => string): Promise<PullStatusServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (code: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(code, { "content-type": "application/json", "cache-control": "no-store", ...headers });
      res.end(JSON.stringify(body));
    };
    if (path === "/healthz") return send(200, { status: "ok" });
    if (path === "/readyz") return send(503, { status: "not ready", checks: { models: status() } });
    return send(
      503,
      { error: { message: `not serving yet: ${status()}`, type: "service_unavailable", code: "model_pulling" } },
      { "retry-after": "10" },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
