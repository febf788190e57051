// Authenticated GET /v1/models on Tessera against a bare node:http server that answers the
// same bytes, in one run: autocannon, 50 connections, 10 s each (5 alternating rounds of 2 s,
// after a 2 s warm-up of each). Tessera
// runs as users run it (`node dist/bin/tessera.js serve`, built first, JSON request logs to a
// file); each server is its own process, apart from the load generator. Prints both rates,
// their ratio (goal: >= 0.5), the latencies and each server's CPU time per request (user +
// system, then each apart, from /proc; it moves less than the rates when other work shares
// the machine).
//   npm run bench -- models   (or: npx tsx bench/models.ts)   [BENCH_DURATION=10] [BENCH_CONNECTIONS=50]
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import autocannon, { type Result } from "autocannon";
import { MODEL_DIRS, startBenchServer } from "./_server.js";

const root = resolve(import.meta.dirname, "..");
const DURATION = Number(process.env["BENCH_DURATION"] ?? 10);
const CONNECTIONS = Number(process.env["BENCH_CONNECTIONS"] ?? 50);
/** Each server's time is split into this many alternating rounds. */
const ROUNDS = 5;

/** The bare baseline: plain JavaScript, no framework, the listing's bytes from BODY. */
const BARE_SERVER = `
import { createServer } from "node:http";
const body = Buffer.from(process.env.BODY, "base64");
const server = createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ url: "http://127.0.0.1:" + server.address().port })));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`;

function build(): void {
  const tsc = spawnSync(join(root, "node_modules/.bin/tsc"), ["-p", "tsconfig.build.json"], { cwd: root, encoding: "utf8" });
  if (!existsSync(join(root, "dist/bin/tessera.js"))) throw new Error(`build failed:\n${tsc.stdout}${tsc.stderr}`);
  if (tsc.status !== 0) console.warn("warning: tsc reported errors; measuring what it emitted");
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((r) => {
    child.once("exit", () => r());
    child.kill("SIGTERM");
  });
}

async function startBare(body: string) {
  const child = spawn(process.execPath, ["--input-type=module", "-e", BARE_SERVER], {
    env: { ...process.env, BODY: Buffer.from(body).toString("base64") },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((r) => createInterface({ input: child.stdout! }).once("line", r));
  return { child, url: (JSON.parse(line) as { url: string }).url };
}

/** CPU seconds a process has used so far, in user space and in the kernel; NaN where /proc cannot tell. */
function cpuSeconds(pid: number | undefined): { user: number; system: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }; // clock ticks (USER_HZ = 100)
  } catch {
    return { user: NaN, system: NaN };
  }
}

interface Round {
  result: Result;
  /** CPU seconds the server used during the round, in user space and in the kernel. */
  user: number;
  system: number;
}

async function load(child: ChildProcess, url: string, headers: Record<string, string>, duration: number): Promise<Round> {
  const before = cpuSeconds(child.pid);
  const result = await autocannon({ url, connections: CONNECTIONS, duration, headers });
  const after = cpuSeconds(child.pid);
  return { result, user: after.user - before.user, system: after.system - before.system };
}

/** Rounds added up: the rate over all of them; the worst round's p50 and p99; CPU per request. */
function summary(name: string, rounds: Round[]) {
  const sum = (f: (r: Result) => number) => rounds.reduce((total, r) => total + f(r.result), 0);
  const total = sum((r) => r.requests.total);
  const perRequest = (seconds: number) => Math.round((seconds / total) * 1e7) / 10;
  const user = rounds.reduce((t, r) => t + r.user, 0);
  const system = rounds.reduce((t, r) => t + r.system, 0);
  return {
    name,
    requestsPerSecond: Math.round(total / sum((r) => r.duration)),
    latencyP50Ms: Math.max(...rounds.map((r) => r.result.latency.p50)),
    latencyP99Ms: Math.max(...rounds.map((r) => r.result.latency.p99)),
    cpuUsPerRequest: perRequest(user + system),
    userUs: perRequest(user),
    kernelUs: perRequest(system),
    total,
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors + r.timeouts),
  };
}

export async function run(): Promise<void> {
  build();
  // The default catalog, served by the bundled model if it is there, else the tiny test model.
  const bundled = MODEL_DIRS["bundled"]!;
  const tessera = await startBenchServer(existsSync(bundled) ? bundled : MODEL_DIRS["tiny"]!, {}, "build");
  const children: ChildProcess[] = [tessera.child];
  try {
    const headers = { authorization: `Bearer ${tessera.key}` };
    const url = `${tessera.url}/v1/models`;
    const first = await fetch(url, { headers });
    const bytes = await first.text();
    if (first.status !== 200 || !bytes.includes('"models":[{')) throw new Error(`listing failed: ${first.status} ${bytes}`);

    const bare = await startBare(bytes);
    children.push(bare.child);
    const bareUrl = `${bare.url}/v1/models`;

    // Other work on the machine comes and goes: alternate the two in rounds so both see the same.
    await load(tessera.child, url, headers, 2);
    await load(bare.child, bareUrl, {}, 2);
    const rounds = { tessera: [] as Round[], bare: [] as Round[] };
    for (let round = 0; round < ROUNDS; round++) {
      rounds.tessera.push(await load(tessera.child, url, headers, DURATION / ROUNDS));
      rounds.bare.push(await load(bare.child, bareUrl, {}, DURATION / ROUNDS));
    }
    const logLines = readFileSync(tessera.logFile, "utf8")
      .split("\n")
      .filter((l) => l.includes('"msg":"request"')).length;
    await stop(tessera.child);
    await stop(bare.child);

    const a = summary("tessera, authenticated", rounds.tessera);
    const b = summary("bare node:http, same bytes", rounds.bare);
    const ratio = a.requestsPerSecond / b.requestsPerSecond;
    console.log(
      `GET /v1/models: ${CONNECTIONS} connections, ${DURATION} s each, ${Buffer.byteLength(bytes)}-byte body, ${logLines} request log lines written`,
    );
    console.table([a, b]);
    console.log(`ratio ${ratio.toFixed(2)} (goal >= 0.5): ${ratio >= 0.5 ? "met" : "NOT met"}`);
    if (a.non2xx + a.errors > 0) console.log("warning: tessera answered non-2xx or failed during the run");
    console.log(
      JSON.stringify({
        bench: "models",
        connections: CONNECTIONS,
        durationS: DURATION,
        tessera: a,
        bare: b,
        ratio: Number(ratio.toFixed(3)),
      }),
    );
  } finally {
    for (const child of children) await stop(child);
    await tessera.stop();
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run();
}
