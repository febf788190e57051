// What the hostile-load benchmark and tests share: request bodies as an attacker sends them,
// probes that time the health endpoints, resident memory of a process, and `tessera keys`.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { promisify } from "node:util";

const root = resolve(import.meta.dirname, "..");
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
  return { textUsed: Number(text[1]), textReserved: Number(text[2]), decisionUsed: Number(decision[1]), decisionReserved: Number(decision[2]) };
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
