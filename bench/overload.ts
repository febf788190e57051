// Sustained overload (issue 7): chat completions from twice as many connections as there are
// generation slots (TESSERA_SLOTS, no wait queue), for BENCH_DURATION seconds, while
// GET /v1/models and GET /healthz are probed. Shows that the excess is refused at once with
// 529 overloaded_error and retry-after, and how responsive the probes stay (p50/p99 against
// the same probes on an idle server). Tiny model, then the bundled model if present.
//   npm run bench -- overload   (or: npx tsx bench/overload.ts)   [BENCH_DURATION=30] [BENCH_SLOTS=2] [BENCH_MODELS=tiny,bundled]
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { runOnEachModel, startBenchServer } from "./_server.js";
import { allDocumented, loadRoute, summarize, type RouteLoad } from "./load.js";

const DURATION = Number(process.env["BENCH_DURATION"] ?? 30);
const SLOTS = Number(process.env["BENCH_SLOTS"] ?? 2);
const MiB = 1024 * 1024;

const probes: RouteLoad[] = [
  { name: "GET /v1/models", method: "GET", path: "/v1/models", connections: 2 },
  { name: "GET /healthz", method: "GET", path: "/healthz", connections: 2 },
];

const generation: RouteLoad = {
  name: `POST /v1/chat/completions (${2 * SLOTS} connections, ${SLOTS} slots)`,
  method: "POST",
  path: "/v1/chat/completions",
  connections: 2 * SLOTS,
  body: { model: "textmodel-26b", max_tokens: 64, messages: [{ role: "user", content: "Tell me about the harbour at dawn." }] },
};

async function runModel(name: string, modelDir: string): Promise<boolean> {
  const server = await startBenchServer(modelDir, { TESSERA_SLOTS: String(SLOTS), TESSERA_QUEUE: "0" });
  try {
    await Promise.all([...probes, generation].map((route) => loadRoute(server, route, 2).result));
    const rssStart = await server.rss();

    const idleRuns = probes.map((route) => loadRoute(server, route, Math.min(10, DURATION)));
    const idle = await Promise.all(idleRuns.map((r) => r.result));

    const overloadRuns = [generation, ...probes].map((route) => loadRoute(server, route, DURATION));
    const overloaded = await Promise.all(overloadRuns.map((r) => r.result));
    await new Promise((r) => setTimeout(r, 2_000));
    const rssEnd = await server.rss();

    const gen = overloadRuns[0]!.tally;
    const answered = gen.statuses["200"] ?? 0;
    const refused = gen.statuses["529"] ?? 0;
    const rows = [
      ...probes.map((route, i) => ({ phase: "idle", ...summarize(route, idle[i]!, idleRuns[i]!.tally) })),
      ...[generation, ...probes].map((route, i) => ({ phase: "overload", ...summarize(route, overloaded[i]!, overloadRuns[i]!.tally) })),
    ];
    console.log(`\noverload, ${name} model (${modelDir}), ${SLOTS} slots, no queue, ${DURATION} s:`);
    console.table(rows);
    const ok =
      allDocumented(
        [...idleRuns, ...overloadRuns].map((r) => r.tally),
        [...idle, ...overloaded],
      ) &&
      refused > 0 &&
      answered > 0 &&
      probes.every((_, i) => Object.keys(overloadRuns[i + 1]!.tally.statuses).every((s) => s === "200"));
    console.log(
      `generation: ${answered} answered, ${refused} refused with 529 (${gen.overloadedWithoutRetryAfter} without retry-after); ` +
        `RSS ${(rssStart / MiB).toFixed(0)} → ${(rssEnd / MiB).toFixed(0)} MiB; contract held: ${ok ? "yes" : "NO"}`,
    );
    console.log(
      JSON.stringify({
        bench: "overload",
        model: name,
        slots: SLOTS,
        durationS: DURATION,
        generation: { answered, refused, refusedWithoutRetryAfter: gen.overloadedWithoutRetryAfter },
        rssStartMiB: Math.round(rssStart / MiB),
        rssEndMiB: Math.round(rssEnd / MiB),
        contractHeld: ok,
        rows,
      }),
    );
    return ok;
  } finally {
    await server.stop();
  }
}

export async function run(): Promise<void> {
  await runOnEachModel(runModel);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run();
}
