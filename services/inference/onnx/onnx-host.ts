// The thread that starts every session worker (onnx-worker.ts), so that their forwards flush
// denormal floats to zero. ONNX Runtime's `session.set_denormal_as_zero` sets the flush-to-zero
// and denormals-are-zero modes (MXCSR) on the thread that creates the process's *first* session
// only, and a thread starts with the modes of the thread that started it. So this thread opens a
// one-node session with the option first of all, and the session workers are started from here,
// as its children: each starts with the modes set. The main thread keeps IEEE arithmetic (with the
// modes set, JavaScript reads `1e-310` as 0). The main-thread side is onnx-host-client.ts.
//
// Why it matters: a softmax over a block-causal mask makes a denormal for every masked entry, and
// on x86 each costs a microcode assist. A 1,024-token prefill of the bundled model on one thread:
// 320 ms as IEEE, 230 ms flushed (ONNX Runtime's profiler: Softmax 98 → 22 ms); the flushed
// values are below 1.2e-38 and never change a logit.
import { type MessagePort, parentPort, type Worker, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import { startModuleWorker } from "../../../lib/module-worker.js";
import { FLUSH_DENORMALS, threadFlushesDenormals } from "./onnx-denormals.js";
import { downloadGraph } from "./onnx-kv-graphs.js";
import { WORKER_MARK, type SessionWorkerData } from "./onnx-worker.js";

export const HOST_MARK = "tessera-ort-host";

export type HostRequest = { kind: "spawn"; child: number; port: MessagePort } | { kind: "terminate"; child: number };

export type HostEvent =
  | { kind: "ready"; flushesDenormals: boolean }
  | { kind: "exit"; child: number; code: number }
  | { kind: "error"; child: number; name: string; message: string };

function serve(port: NonNullable<typeof parentPort>): void {
  const children = new Map<number, Worker>();
  // Opening the session sets the modes (where it is the process's first); a failure leaves them unset, which only costs speed.
  const ready = ort.InferenceSession.create(downloadGraph(), { extra: FLUSH_DENORMALS })
    .then((session) => session.release())
    .catch(() => undefined)
    .then(() => port.postMessage({ kind: "ready", flushesDenormals: threadFlushesDenormals() } satisfies HostEvent));

  port.on("message", (req: HostRequest) => {
    void ready.then(() => {
      if (req.kind === "terminate") {
        void children.get(req.child)?.terminate();
        return;
      }
      const data: SessionWorkerData = { mark: WORKER_MARK, port: req.port };
      const worker = startModuleWorker("onnx-worker", import.meta.url, data, [req.port]);
      children.set(req.child, worker);
      worker.on("error", (err) =>
        port.postMessage({ kind: "error", child: req.child, name: err.name, message: err.message } satisfies HostEvent),
      );
      worker.on("exit", (code) => {
        children.delete(req.child);
        port.postMessage({ kind: "exit", child: req.child, code } satisfies HostEvent);
      });
    });
  });
}

if (parentPort !== null && workerData === HOST_MARK) serve(parentPort);
