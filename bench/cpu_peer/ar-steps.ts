// Where a served autoregressive reply's time goes (bench/cpu-peer.md, issue 36 item 4): the
// engine's greedy reply after a 512-token prompt, as bench/cpu-peer.ts serves it, with each
// step's forward (the runner's round trip), the host time between forwards, and ONNX Runtime's
// own run time on the worker for the last step, and the cores the process kept busy during the
// steps (CPU time over wall time: 1.0 is the forward's one thread alone).
//
//   npx tsx bench/cpu_peer/ar-steps.ts MODEL_DIR [replies]     # e.g. .cache/cpu-peer/qwen3-1.7b-int8-newkv
import type { ForwardRunner } from "../../services/inference/decoder/forward.js";
import { lastWorkerRun } from "../../services/inference/onnx/onnx-worker-session.js";
import { TesseraSide } from "./tessera-side.js";

const [dir, replies = "2"] = process.argv.slice(2);
if (dir === undefined) throw new Error("usage: ar-steps.ts MODEL_DIR [replies]");
const side = await TesseraSide.load(dir, 1);
const SENTENCE = "The weather in Paris is sunny today, and the quick brown fox jumps over the lazy dog. ";
const prompt = side.encode(SENTENCE.repeat(60)).slice(0, 512);
const runner = side.engine.runner as ForwardRunner;
const run = runner.run.bind(runner);
const forwards: { start: number; end: number; prefill: boolean; past: number }[] = [];
/** CPU usage and time at the first step's forward. */
let stepsFrom: { cpu: NodeJS.CpuUsage; at: number } | undefined;
runner.run = async (inputs, fetch, ...rest) => {
  const start = performance.now();
  if (fetch.output !== "none") stepsFrom ??= { cpu: process.cpuUsage(), at: start };
  const out = await (run as (...a: unknown[]) => ReturnType<ForwardRunner["run"]>)(inputs, fetch, ...rest);
  forwards.push({ start, end: performance.now(), prefill: fetch.output === "none", past: inputs.past });
  return out;
};
for (let r = 0; r < Number(replies); r++) {
  forwards.length = 0;
  stepsFrom = undefined;
  const { msPerToken, steps } = await side.decode(prompt, 33);
  const cpu = process.cpuUsage(stepsFrom!.cpu);
  const coresBusy = (cpu.user + cpu.system) / 1000 / (performance.now() - stepsFrom!.at);
  const stepForwards = forwards.filter((f) => !f.prefill);
  const ms = stepForwards.map((f) => Math.round(f.end - f.start));
  const between = forwards.slice(1).map((f, i) => Math.round(f.start - forwards[i]!.end));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  console.log(
    JSON.stringify({
      msPerToken: Number(msPerToken.toFixed(1)),
      steps,
      forwardMs: Number(mean(ms).toFixed(1)),
      coresBusy: Number(coresBusy.toFixed(2)),
      fedPast: [stepForwards[0]?.past, stepForwards.at(-1)?.past],
      betweenForwardsMs: between,
      forwardsMs: ms,
      lastWorkerRun: lastWorkerRun(side.engine.model.session),
    }),
  );
}
await side.close();
