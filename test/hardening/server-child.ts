// A Tessera of startTestTessera in a process of its own, for the hardening tests: a crash is
// seen as the process exiting, and its memory is measured apart from the load generator's.
// Started by spawnTessera (server-process.ts); talks over the IPC channel:
//   → {type: "ready", url, key}                      once listening
//   ← {type: "memory"}  → {type: "memory", rss, heapUsed, …}   after two full GCs (--expose-gc)
//   ← {type: "state"}   → {type: "state", prototype, logs}      Object.prototype's keys, error/warn log lines
//   ← {type: "slots"}   → {type: "slots", free, total, started, cancelled, finished}   of the fake worker
//   ← {type: "close"}   → exits 0 after a graceful close
import { startFakeInferenceWorker } from "../helpers/fake-worker.js";
import { startTestTessera } from "../helpers/tessera.js";
import { createFakeInferenceWorker } from "./fake-inference.js";
import type { HardeningServerOptions } from "./server-process.js";

const send = (message: object) => process.send?.(message);
const options = JSON.parse(process.env["HARDENING_OPTIONS"] ?? "{}") as HardeningServerOptions;
const tessera = await startTestTessera(options);
const fake = options.fakeWorker === undefined ? undefined : createFakeInferenceWorker(options.fakeWorker);
if (fake !== undefined) {
  const worker = await startFakeInferenceWorker(fake.impl);
  tessera.announceWorker({ id: "fake-worker", address: worker.url, slotsTotal: fake.slots.total, slotsFree: fake.slots.total });
}
// Lines at warn and above only (TESSERA_LOG_LEVEL), kept apart so a long run holds no log in memory.
const problems: string[] = [];
const logs = tessera.logs;
logs.push = (...lines: string[]) => {
  problems.push(...lines);
  if (problems.length > 1000) problems.splice(0, problems.length - 1000);
  return 0;
};

const gc = (globalThis as { gc?: () => void }).gc;
process.on("message", (message: { type: string }) => {
  void (async () => {
    switch (message.type) {
      case "memory":
        for (let i = 0; i < 3; i++) {
          gc?.();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        send({ type: "memory", ...process.memoryUsage() });
        break;
      case "state":
        send({
          type: "state",
          prototype: Object.getOwnPropertyNames(Object.prototype).sort(),
          polluted: Object.keys(Object.prototype),
          logs: problems,
        });
        break;
      case "slots":
        send({ type: "slots", free: fake?.slots.free, total: fake?.slots.total, ...fake?.counts });
        break;
      case "close":
        await tessera.close();
        process.exit(0);
    }
  })();
});
send({ type: "ready", url: tessera.url, key: tessera.key });
