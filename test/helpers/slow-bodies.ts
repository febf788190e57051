// The slow-body flood (issue 27, item 5), shared by test/hostile/slow-bodies.test.ts and
// bench/hostile.ts: connections from several loopback addresses, each a POST with no key and
// `Content-Length: 100` that sends one body byte every few seconds and reconnects when closed,
// from a process of its own; and probes from another address on new connections.
import { spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { createInterface } from "node:readline";

const FLOOD = `
const net = require("node:net");
const [port, addresses, perAddress, everyMs] = process.argv.slice(1);
let connections = 0;
const head = "POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: 100\\r\\n\\r\\n";
const open = (localAddress) => {
  const s = net.connect({ port: Number(port), host: "127.0.0.1", localAddress });
  let timer;
  s.on("error", () => undefined);
  s.on("connect", () => {
    connections++;
    s.write(head);
    timer = setInterval(() => s.write("{"), Number(everyMs));
  });
  s.on("data", () => undefined);
  s.on("close", () => { clearInterval(timer); setTimeout(() => open(localAddress), 10); });
};
for (const address of addresses.split(",")) for (let i = 0; i < Number(perAddress); i++) open(address);
setInterval(() => console.log(connections), 1000);
`;

export interface Flood {
  child: ChildProcess;
  /** Connections the flood has opened so far (reported every second). */
  connections(): number;
  stop(): Promise<void>;
}

/** Starts the flood against 127.0.0.1:`port`: `perAddress` connections from each of `addresses`. */
export function startSlowBodyFlood(port: number, addresses: string[], perAddress: number, byteEveryMs: number): Flood {
  const child = spawn(process.execPath, ["-e", FLOOD, String(port), addresses.join(","), String(perAddress), String(byteEveryMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let opened = 0;
  createInterface({ input: child.stdout! }).on("line", (line) => (opened = Number(line)));
  const exited = new Promise<void>((done) => child.on("exit", () => done()));
  return {
    child,
    connections: () => opened,
    async stop() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** A request on a new connection from `localAddress`: the status, or 0 on a reset or after `timeoutMs`. */
export function requestFrom(
  port: number,
  localAddress: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string; timeoutMs?: number },
): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: number) => resolve({ status, ms: Math.round(performance.now() - started) });
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: options.method ?? "GET",
        path: options.path,
        headers: options.headers,
        localAddress,
        agent: false,
        timeout: options.timeoutMs ?? 5000,
      },
      (res) => {
        res.resume();
        res.on("end", () => done(res.statusCode ?? 0));
        res.on("error", () => done(0));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(0));
    req.end(options.body);
  });
}
