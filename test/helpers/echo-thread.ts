// A worker thread for lib/worker-channel.test.ts: echoes, sums transferred floats, fails and crashes on request.
import { parentPort } from "node:worker_threads";
import type { Unnumbered } from "../../lib/worker-channel.js";

export type EchoRequest =
  | { id: number; op: "echo"; value: string; delayMs?: number }
  | { id: number; op: "sum"; data: Float32Array }
  | { id: number; op: "fail"; message: string }
  | { id: number; op: "hang" }
  | { id: number; op: "crash"; code: number };

export type EchoReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string };

const port = parentPort!;
port.on("message", (request: EchoRequest) => {
  const reply = (r: Unnumbered<EchoReply>) => port.postMessage({ ...r, id: request.id });
  switch (request.op) {
    case "echo":
      setTimeout(() => reply({ ok: true, value: request.value }), request.delayMs ?? 0);
      return;
    case "sum":
      return reply({ ok: true, value: request.data.reduce((a, b) => a + b, 0) });
    case "fail":
      return reply({ ok: false, message: request.message });
    case "hang":
      return;
    case "crash":
      process.exit(request.code);
  }
});
