// Decision benchmark (issue 4): 16 questions on one ~1,000-token state against 1 question on the
// same state, in one run, through the real decision service and inference engine. The state is
// read once, so the goal is that the 16 take at most 1.5x the time of the 1 (issue 22; 2x before). Then issue 5's
// latency: 4 questions on a ~300-token state (target: at most 300 ms on the 2-core machine).
// Both report where the time goes, and how long the event loop was held up.
//
// Then the document's widest question (bench/decision-wide.ts): one `choice` of 128 options,
// every third with a short description, alone and with a 16-token chat sent behind it.
//
//   npx tsx bench/decision.ts [--iterations N] [--model-dir DIR ...] [--row-tokens N] [--threads N] [--only ratio|latency|wide]
//
// --threads: ONNX Runtime's intra-op threads for the ratio (default: its own choice). The ratio
// also comes as CPU time of the whole process, which a loaded machine stretches far less
// than the wall time; with --threads 1 no thread of ONNX Runtime's spins either.
//
// Runs on the tiny test model, and on the bundled model when models/tessera-bd-small exists.
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { formatDecisionBench, formatDecisionLatency } from "./decision/format.js";
import { benchDecision, benchDecisionLatency } from "./decision/runs.js";

// Its parts, in bench/decision/: rig.ts (the services over one model, timed phase by phase),
// questions.ts (the requests), runs.ts (the ratio and the latency), phases.ts (what is measured),
// format.ts (the report).
export { formatDecisionBench, formatDecisionLatency } from "./decision/format.js";
export { type DecisionPhases, type EventLoopDelay, median, rssMiB } from "./decision/phases.js";
export { requestOf } from "./decision/questions.js";
export { openRig, type Rig } from "./decision/rig.js";
export { benchDecision, benchDecisionLatency, type DecisionBenchResult, type DecisionLatencyResult } from "./decision/runs.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_MODEL_DIRS = [path.join(ROOT, "test/fixtures/tiny-model"), path.join(ROOT, "models/tessera-bd-small")];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      iterations: { type: "string", default: "20" },
      "model-dir": { type: "string", multiple: true },
      "row-tokens": { type: "string" },
      threads: { type: "string" },
      only: { type: "string" },
    },
  });
  const iterations = Number(values.iterations);
  if (!Number.isInteger(iterations) || iterations < 1) throw new Error("--iterations must be a positive integer");
  const dirs = (values["model-dir"] ?? DEFAULT_MODEL_DIRS).filter((dir) => existsSync(path.join(dir, "config.json")));
  const only = values.only;
  const threads = values.threads === undefined ? undefined : Number(values.threads);
  if (threads !== undefined && (!Number.isInteger(threads) || threads < 1)) throw new Error("--threads must be a positive integer");
  if (only === undefined || only === "ratio")
    for (const dir of dirs) console.log(formatDecisionBench(await benchDecision(dir, iterations, threads)));
  if (only === undefined || only === "latency") {
    for (const dir of dirs) console.log(formatDecisionLatency(await benchDecisionLatency(dir, iterations)));
  }
  if (only !== undefined && only !== "wide") return;
  const { benchWideDecision, formatWideDecision } = await import("./decision-wide.js");
  const rowTokens = values["row-tokens"] === undefined ? undefined : Number(values["row-tokens"]);
  const wideIterations = Math.max(1, Math.ceil(iterations / 4));
  for (const dir of dirs) console.log(formatWideDecision(await benchWideDecision(dir, wideIterations, rowTokens)));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
