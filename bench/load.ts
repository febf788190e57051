import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon, { type Result } from "autocannon";
import { runOnEachModel, startBenchServer, type BenchServer } from "./_server.js";

const _root = resolve(import.meta.dirname, "..");
const DURATION = Number(process.env["BENCH_DURATION"] ?? 60);

export interface RouteLoad {
  name: string;
  method: "GET" | "POST";
  path: string;
  body?: unknown;
  connections: number;
}

/** Statuses seen, and 529s that came without retry-after (a contract breach). */
export interface Tally {
  statuses: Record<string, number>;
  overloadedWithoutRetryAfter: number;
}

/** One autocannon instance for one route; every answer is tallied by status. */
export function loadRoute(server: BenchServer, route: RouteLoad, seconds: number): { result: Promise<Result>; tally: Tally } {
  const tally: Tally = { statuses: {}, overloadedWithoutRetryAfter: 0 };
  const headers: Record<string, string> = { authorization: `Bearer ${server.key}` };
  if (route.body !== undefined) headers["content-type"] = "application/json";
  const result = autocannon({
    url: server.url,
    connections: route.connections,
    duration: seconds,
    timeout: 60,
    requests: [
      {
        method: route.method,
        path: route.path,
        headers,
        ...(route.body !== undefined && { body: JSON.stringify(route.body) }),
        onResponse(status, _body, _context, responseHeaders) {
          tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
          if (status === 529 && !hasHeader(responseHeaders, "retry-after")) tally.overloadedWithoutRetryAfter++;
        },
      },
    ],
  });
  return { result, tally };
}

function hasHeader(headers: unknown, name: string): boolean {
  if (Array.isArray(headers)) return headers.some((h, i) => i % 2 === 0 && String(h).toLowerCase() === name);
  return typeof headers === "object" && headers !== null && Object.keys(headers).some((h) => h.toLowerCase() === name);
}

/** The routes of the mix. Generation stays short (16 tokens) so each route sees many requests. */
export function mixedRoutes(): RouteLoad[] {
  const messages = [{ role: "user", content: "Write one sentence about the sea." }];
  return [
    { name: "GET /v1/models", method: "GET", path: "/v1/models", connections: 4 },
    {
      name: "POST /v1/systemone",
      method: "POST",
      path: "/v1/systemone",
      connections: 2,
      body: {
        model: "decisionmodel-latest",
        state: "Subject: You have won a free cruise! Click the link within 24 hours to claim your prize.",
        questions: {
          spam: { type: "noul" },
          tone: { type: "choice", criteria: { friendly: "warm", neutral: "plain", pushy: "pressing" } },
          urgency: { type: "score", criteria: ["none", "some", "high"] },
        },
      },
    },
    {
      name: "POST /v1/chat/completions",
      method: "POST",
      path: "/v1/chat/completions",
      connections: 2,
      body: { model: "textmodel-26b", max_tokens: 16, messages },
    },
    {
      name: "POST /v1/chat/completions (stream)",
      method: "POST",
      path: "/v1/chat/completions",
      connections: 2,
      body: { model: "textmodel-26b", max_tokens: 16, stream: true, messages },
    },
  ];
}

/** The figures of one route's run. */
export function summarize(route: RouteLoad, result: Result, tally: Tally) {
  const total = Object.values(tally.statuses).reduce((a, b) => a + b, 0);
  return {
    route: route.name,
    connections: route.connections,
    requests: total,
    perSecond: Math.round((total / result.duration) * 10) / 10,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    statuses: Object.entries(tally.statuses)
      .map(([status, count]) => `${status}:${count}`)
      .join(" "),
    errors: result.errors + result.timeouts,
  };
}

/** True when every answer was 2xx or a documented 429/529 (with retry-after), and nothing failed. */
export function allDocumented(tallies: Tally[], results: Result[]): boolean {
  const statusesOk = tallies.every(
    (t) => Object.keys(t.statuses).every((s) => /^2\d\d$/.test(s) || s === "429" || s === "529") && t.overloadedWithoutRetryAfter === 0,
  );
  return statusesOk && results.every((r) => r.errors + r.timeouts === 0);
}

const MiB = 1024 * 1024;

async function runModel(name: string, modelDir: string) {
  const server = await startBenchServer(modelDir);
  try {
    const routes = mixedRoutes();
    // Warm-up: every route a few seconds, so the start figure is taken on a warm process.
    await Promise.all(routes.map((route) => loadRoute(server, route, 3).result));
    const rssStart = await server.rss();
    const runs = routes.map((route) => loadRoute(server, route, DURATION));
    const results = await Promise.all(runs.map((r) => r.result));
    await new Promise((r) => setTimeout(r, 2_000));
    const rssEnd = await server.rss();
    const rows = routes.map((route, i) => summarize(route, results[i]!, runs[i]!.tally));
    console.log(`\nmixed load, ${name} model (${modelDir}), ${DURATION} s:`);
    console.table(rows);
    const ok = allDocumented(
      runs.map((r) => r.tally),
      results,
    );
    console.log(
      `RSS ${(rssStart / MiB).toFixed(0)} MiB at start, ${(rssEnd / MiB).toFixed(0)} MiB at end; every answer 2xx or documented 429/529: ${ok ? "yes" : "NO"}`,
    );
    console.log(
      JSON.stringify({
        bench: "load",
        model: name,
        durationS: DURATION,
        rssStartMiB: Math.round(rssStart / MiB),
        rssEndMiB: Math.round(rssEnd / MiB),
        allDocumented: ok,
        routes: rows,
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
