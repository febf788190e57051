// Connection hygiene (issue 11, items 4 and 6): idle sockets cannot lock clients out, a silent
// connection is closed after the first-byte timeout, and header limits apply to the whole request.
import { spawn } from "node:child_process";
import { request } from "node:http";
import { connect } from "node:net";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawExchange } from "../hardening/http-client.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

/** 1,100 idle sockets to the port in argv, each reopened as soon as it closes; prints a line once all are open. */
const ATTACKER = `
const net = require("node:net");
const port = Number(process.argv[1]);
let opened = 0;
const open = () => {
  const s = net.connect(port, "127.0.0.1");
  s.on("error", () => undefined);
  s.on("connect", () => { if (++opened === 1100) console.log("open"); });
  s.on("close", () => setImmediate(open));
};
for (let i = 0; i < 1100; i++) open();
`;

/** GET /healthz from `localAddress` on a new connection: the status, or 0 after 5 s. */
function probe(port: number, localAddress: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/healthz", localAddress, agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
    req.end();
  });
}

let tessera: TestTessera;
let port: number;
beforeAll(async () => {
  tessera = await startTestTessera({ env: { TESSERA_FIRST_BYTE_TIMEOUT_MS: "1500", TESSERA_LOG_LEVEL: "warn" } });
  port = Number(new URL(tessera.url).port);
});
afterAll(async () => {
  await tessera?.close();
});

describe("connections", () => {
  it("answers /healthz 5 of 5 while an attacker keeps 1,100 idle sockets open and reopens each closed one", {
    timeout: 60_000,
  }, async () => {
    // The attacker is a process of its own, as it would be.
    const attacker = spawn(process.execPath, ["-e", ATTACKER, String(port)], { stdio: ["ignore", "pipe", "inherit"] });
    const lines = createInterface({ input: attacker.stdout! });
    await new Promise<void>((resolve) => lines.once("line", () => resolve()));
    try {
      const answers: number[] = [];
      for (let i = 0; i < 5; i++) {
        // The probe comes from another address (127.0.0.2, as a kubelet would): the attacker's
        // per-address cap (256) makes its own sockets the ones closed.
        answers.push(await probe(port, "127.0.0.2"));
        await new Promise((r) => setTimeout(r, 300));
      }
      expect(answers).toEqual([200, 200, 200, 200, 200]);
    } finally {
      attacker.kill("SIGKILL");
    }
  });

  it("closes a connection that sends no byte within the first-byte timeout", async () => {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => undefined);
    const started = performance.now();
    await new Promise<void>((resolve) => socket.on("close", () => resolve()));
    const ms = performance.now() - started;
    expect(ms).toBeGreaterThan(1000);
    expect(ms).toBeLessThan(5000);
  });

  it("refuses more than 100 header lines, and headers whose lines together pass 16 KiB, with 431", async () => {
    const many = Array.from({ length: 2001 }, (_, i) => `x-h${i}: 1`).join("\r\n");
    const tooMany = await rawExchange(port, Buffer.from(`GET /healthz HTTP/1.1\r\nhost: x\r\n${many}\r\n\r\n`));
    expect(tooMany.status).toBe(431);
    const wide = Array.from({ length: 50 }, (_, i) => `x-w${i}: ${"a".repeat(400)}`).join("\r\n");
    const tooLarge = await rawExchange(port, Buffer.from(`GET /healthz HTTP/1.1\r\nhost: x\r\n${wide}\r\n\r\n`));
    expect(tooLarge.status).toBe(431);
    const fine = await rawExchange(port, Buffer.from("GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"));
    expect(fine.status).toBe(200);
  });
});
