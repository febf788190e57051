// What the hostile-load benchmark and tests share (test/helpers/: imported by bench/ and test/ only): request bodies as an attacker sends them,
// probes that time the health endpoints, resident memory of a process, and `tessera keys`.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";

const root = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** A chat body of `messages` user messages of `chars` characters each (2,048 × 3,600: 7.4 MB). */
export function hugeChatBody(messages = 2048, chars = 3600, model = "textmodel-26b"): string {
  const words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ";
  const content = words.repeat(Math.ceil(chars / words.length)).slice(0, chars);
  return JSON.stringify({
    model,
    max_tokens: 16,
    messages: Array.from({ length: messages }, () => ({ role: "user", content })),
  });
}

/** A decision of `questions` choice questions of `options` options each (64 × 128 is allowed). */
export function wideDecisionBody(questions: number, options: number, model = "decisionmodel-latest"): string {
  const criteria = Object.fromEntries(Array.from({ length: options }, (_, i) => [`option number ${i}`, `the ${i}th kind of thing`]));
  return JSON.stringify({
    model,
    state: "A customer writes: the parcel arrived late and the box was damaged, but the support team replaced it quickly.",
    questions: Object.fromEntries(Array.from({ length: questions }, (_, q) => [`q${q}`, { type: "choice", criteria }])),
  });
}

/** A decision whose state is one JSON object of about `bytes` bytes: many small nested records (8.3 MB: the issue's). */
export function objectStateDecisionBody(bytes: number, model = "decisionmodel-latest"): string {
  // Ids of seven digits, so that every record has the same length.
  const record = (i: number) => ({
    id: 1_000_000 + i,
    name: `customer ${1_000_000 + i}`,
    tags: ["late", "damaged"],
    order: { n: 2_000_000 + i },
  });
  const one = JSON.stringify(record(1)).length + 1;
  const records = Array.from({ length: Math.ceil(bytes / one) }, (_, i) => record(i));
  return JSON.stringify({ model, state: { records }, questions: { spam: { type: "noul" } } });
}

export function smallDecisionBody(questions: number, model = "decisionmodel-latest"): string {
  return JSON.stringify({
    model,
    state: "Win a free cruise now!!!",
    questions: Object.fromEntries(Array.from({ length: questions }, (_, q) => [`spam${q}`, { type: "noul" }])),
  });
}

export interface ProbeResult {
  path: string;
  tries: number;
  maxMs: number;
  failures: number;
}

/**
 * Times GET `paths` every `everyMs` until `stop` resolves: each probe has `timeoutMs`, a
 * timeout or a status other than 200 is a failure (a timed-out probe counts its timeout).
 */
export async function probeWhile(base: string, paths: string[], stop: Promise<unknown>, everyMs = 200, timeoutMs = 5_000) {
  const results = new Map<string, ProbeResult>(paths.map((path) => [path, { path, tries: 0, maxMs: 0, failures: 0 }]));
  let done = false;
  void stop.finally(() => (done = true));
  const loops = paths.map(async (path) => {
    const result = results.get(path)!;
    while (!done) {
      const started = performance.now();
      let ok = false;
      try {
        const res = await fetch(base + path, { signal: AbortSignal.timeout(timeoutMs) });
        await res.arrayBuffer();
        ok = res.status === 200;
      } catch {
        ok = false;
      }
      result.tries++;
      result.maxMs = Math.max(result.maxMs, Math.round(performance.now() - started));
      if (!ok) result.failures++;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  });
  await stop.catch(() => undefined);
  await Promise.all(loops);
  return [...results.values()];
}

/** Resident memory of a process in bytes (Linux /proc). */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}

/** Samples a process's RSS every `everyMs` until `stop` resolves; the peak in bytes. */
export async function peakRssWhile(pid: number, stop: Promise<unknown>, everyMs = 50): Promise<number> {
  let peak = 0;
  let done = false;
  void stop.finally(() => (done = true));
  while (!done) {
    try {
      peak = Math.max(peak, rssOf(pid));
    } catch {
      break;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return peak;
}

/** `tessera keys …` against a data directory; its stdout. */
export async function tesseraKeys(dataDir: string, args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ["--import", "tsx", "bin/tessera.ts", "keys", ...args], {
    cwd: root,
    env: { ...process.env, TESSERA_DATA_DIR: dataDir, TESSERA_LOG_LEVEL: "silent" },
  });
  return stdout;
}

/** A new key in a new account with the given limits: the key, its id and the account id. */
export async function createKey(dataDir: string, limits: string[]): Promise<{ key: string; keyId: string; accountId: string }> {
  const out = await tesseraKeys(dataDir, ["create", "--name", "hostile", ...limits]);
  const key = /tsr_\S+/.exec(out)?.[0];
  const keyId = /key (\S+)/.exec(out)?.[1];
  const accountId = /account (\S+)/.exec(out)?.[1];
  if (key === undefined || keyId === undefined || accountId === undefined) throw new Error(`unexpected output of keys create:\n${out}`);
  return { key, keyId, accountId };
}

export interface AccountFigures {
  textUsed: number;
  textReserved: number;
  decisionUsed: number;
  decisionReserved: number;
}

export async function accountFigures(dataDir: string, accountId: string): Promise<AccountFigures> {
  const out = await tesseraKeys(dataDir, ["account", accountId]);
  const text = /text tokens:.*used (\d+)\s+reserved (\d+)/.exec(out);
  const decision = /decision tokens:.*used (\d+)\s+reserved (\d+)/.exec(out);
  if (text === null || decision === null) throw new Error(`unexpected output of keys account:\n${out}`);
  return {
    textUsed: Number(text[1]),
    textReserved: Number(text[2]),
    decisionUsed: Number(decision[1]),
    decisionReserved: Number(decision[2]),
  };
}

/** A key's ledger summed over every day: requests, text tokens (prompt + completion), decision input tokens. */
export async function ledgerTotals(dataDir: string, keyId: string): Promise<{ requests: number; text: number; decision: number }> {
  const out = await tesseraKeys(dataDir, ["usage", keyId]);
  const totals = { requests: 0, text: 0, decision: 0 };
  for (const line of out.split("\n")) {
    const m = /^\d{4}-\d{2}-\d{2}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/.exec(line.trim());
    if (m === null) continue;
    totals.requests += Number(m[1]);
    totals.text += Number(m[2]) + Number(m[3]);
    totals.decision += Number(m[4]);
  }
  return totals;
}

export interface ServeChild {
  url: string;
  /** The operations port's URL (TESSERA_OPS_PORT set), else undefined. */
  opsUrl: string | undefined;
  /** Every line the server wrote to stdout (its log), as they come. */
  lines: string[];
  child: ChildProcess;
  /** Resolves with the exit code or signal. */
  exited: Promise<string>;
}

/** `tessera serve` from the sources on a free port of 127.0.0.1 with the given settings. */
export async function startServe(env: Record<string, string>, timeoutMs = 60_000): Promise<ServeChild> {
  const child = spawn(process.execPath, ["--import", "tsx", "bin/tessera.ts", "serve"], {
    cwd: root,
    env: { ...process.env, TESSERA_HOST: "127.0.0.1", TESSERA_PORT: "0", TESSERA_INTRA_OP_THREADS: "1", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<string>((done) => child.on("exit", (code, signal) => done(String(code ?? signal))));
  const lines: string[] = [];
  const { url, opsUrl } = await new Promise<{ url: string; opsUrl: string | undefined }>((ok, fail) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error("tessera serve did not listen in time"));
    }, timeoutMs);
    void exited.then((how) => fail(new Error(`tessera serve exited (${how}) before listening`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line);
      if (!line.includes('"tessera listening"')) return;
      clearTimeout(timer);
      ok(JSON.parse(line) as { url: string; opsUrl: string | undefined });
    });
  });
  return { url, opsUrl, lines, child, exited };
}

export interface TinyServe extends ServeChild {
  key: string;
  scratch: string;
  /** Kills the server (SIGKILL) and removes its data directory. */
  close(): Promise<void>;
}

/**
 * `tessera serve` of the tiny test model in a process of its own, with a bootstrap key, a data
 * directory under a fresh temporary folder, and a rate no test reaches; `env` adds or overrides.
 */
export async function startTinyServe(name: string, modelDir: string, env: Record<string, string> = {}): Promise<TinyServe> {
  const scratch = mkdtempSync(join(tmpdir(), `tessera-${name}-`));
  const key = `tsr_${randomBytes(32).toString("base64url")}`;
  const serve = await startServe({
    TESSERA_DATA_DIR: join(scratch, "data"),
    TESSERA_MODELS_CONFIG: writeCatalog(scratch, modelDir),
    TESSERA_BOOTSTRAP_KEY: key,
    TESSERA_DEFAULT_RPM: "100000",
    TESSERA_LOG_LEVEL: "info",
    ...env,
  });
  return {
    ...serve,
    key,
    scratch,
    async close() {
      serve.child.kill("SIGKILL");
      await serve.exited;
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/** A models config serving `modelDir` as textmodel-26b and decisionmodel-0.1 (-latest); its path. */
export function writeCatalog(dir: string, modelDir: string): string {
  const file = join(dir, "models.config.json");
  const common = { release_date: "2026-11-22", model_dir: modelDir };
  writeFileSync(
    file,
    JSON.stringify({
      models: [
        { id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "text", ...common },
        { id: "decisionmodel-0.1", kind: "decision", family: "decisionmodel", version: "0.1", description: "decisions", ...common },
      ],
      latest: [{ id: "decisionmodel-latest", family: "decisionmodel" }],
    }),
  );
  return file;
}

export interface CrashTrial {
  /** Requests sent before the kill, and how many were answered. */
  sent: number;
  answered: number;
  /** The ledger's sums and the account's counters after the restart. */
  ledger: { text: number; decision: number; requests: number };
  account: AccountFigures;
  agree: boolean;
}

/**
 * Crash trials on one data directory: a server under chat (plain and streamed) and decision
 * traffic of a key with finite quotas (so every request holds quota) is killed with SIGKILL
 * `killAfterMs[i]` after its third answer; a fresh server starts on the same directory, the
 * ledger and the account's counters are compared, and that server is the next trial's.
 */
export async function crashTrials(
  dataDir: string,
  catalog: string,
  keyOf: { key: string; keyId: string; accountId: string },
  killAfterMs: readonly number[],
  onTrial: (trial: CrashTrial) => void = () => undefined,
): Promise<CrashTrial[]> {
  const env = { TESSERA_DATA_DIR: dataDir, TESSERA_MODELS_CONFIG: catalog, TESSERA_DEFAULT_RPM: "100000", TESSERA_LOG_LEVEL: "info" };
  const headers = { authorization: `Bearer ${keyOf.key}`, "content-type": "application/json" };
  const bodies = [
    JSON.stringify({ model: "textmodel-26b", max_tokens: 24, messages: [{ role: "user", content: "Tell me a story." }] }),
    JSON.stringify({ model: "textmodel-26b", max_tokens: 96, stream: true, messages: [{ role: "user", content: "Count to ten." }] }),
    smallDecisionBody(3),
  ];
  const paths = ["/v1/chat/completions", "/v1/chat/completions", "/v1/systemone"];
  const trials: CrashTrial[] = [];
  let server = await startServe(env);
  try {
    for (const delay of killAfterMs) {
      let sent = 0;
      let answered = 0;
      let stop = false;
      const url = server.url;
      const clients = Array.from({ length: 6 }, async (_, c) => {
        for (let i = c; !stop; i++) {
          sent++;
          try {
            const res = await fetch(url + paths[i % 3]!, { method: "POST", headers, body: bodies[i % 3]! });
            await res.arrayBuffer();
            answered++;
          } catch {
            return; // the server is gone
          }
        }
      });
      // The first forwards of a fresh process are slow: the clock starts at the third answer.
      for (let waited = 0; answered < 3 && waited < 60_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, delay));
      stop = true;
      server.child.kill("SIGKILL");
      await server.exited;
      await Promise.all(clients);

      server = await startServe(env);
      const ledger = await ledgerTotals(dataDir, keyOf.keyId);
      const account = await accountFigures(dataDir, keyOf.accountId);
      const agree =
        account.textUsed === ledger.text &&
        account.decisionUsed === ledger.decision &&
        account.textReserved === 0 &&
        account.decisionReserved === 0;
      const trial = { sent, answered, ledger, account, agree };
      trials.push(trial);
      onTrial(trial);
    }
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
  }
  return trials;
}
