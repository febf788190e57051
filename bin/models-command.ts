import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { repoFolder, snapshotDir } from "../lib/hub/cache.js";
import type { HubEnv } from "../lib/hub/env.js";
import { PullError } from "../lib/hub/errors.js";
import { formatBytes } from "../lib/hub/progress.js";
import { listPulled, type PulledManifest, pulledFolder } from "../services/registry/pulled.js";

export const MODELS_HELP = `Usage:
  tessera models list
      The models \`tessera pull\` put in TESSERA_DATA_DIR: id, family, weights, disk use (the
      model directory; the checkpoint in the Hugging Face cache) and repo@commit.
  tessera models rm <org/name|alias> [--keep-cache]
      Remove a pulled model: its conversions and manifest, and its checkpoint's revision from
      the Hugging Face cache (blobs no other revision uses), unless --keep-cache.
`;

function du(path: string): number {
  let s: ReturnType<typeof lstatSync>;
  try {
    s = lstatSync(path);
  } catch {
    return 0;
  }
  if (s.isDirectory()) return readdirSync(path).reduce((n, name) => n + du(join(path, name)), 0);
  return s.isFile() ? s.size : 0;
}

export function modelsTable(models: readonly PulledManifest[]): string {
  const rows = [
    ["ID", "ALIASES", "FAMILY", "WEIGHTS", "MODEL", "CHECKPOINT", "REPO@COMMIT"],
    ...models.map((m) => [
      m.repo,
      m.aliases.join(",") || "-",
      m.family,
      m.weights,
      formatBytes(m.sizeBytes),
      m.source === "tessera" ? "(linked)" : formatBytes(m.checkpointBytes),
      `${m.repo}@${m.commit.slice(0, 12)}`,
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** Removes snapshots/<commit>, the refs naming it and the blobs no remaining snapshot points to; the bytes freed. */
export function removeCachedRevision(env: HubEnv, repo: string, commit: string): number {
  const folder = repoFolder(env.cacheDir, repo);
  const snap = snapshotDir(folder, commit);
  if (!existsSync(snap)) return 0;
  const blobsOf = (dir: string): Set<string> => {
    const out = new Set<string>();
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const at = join(d, name);
        const s = lstatSync(at);
        if (s.isDirectory()) walk(at);
        else if (s.isSymbolicLink()) {
          try {
            out.add(statSync(at).ino.toString());
          } catch {
            // a dangling pointer names no blob
          }
        }
      }
    };
    walk(dir);
    return out;
  };
  const mine = blobsOf(snap);
  const others = new Set<string>();
  for (const other of readdirSync(join(folder, "snapshots")))
    if (other !== commit) for (const ino of blobsOf(join(folder, "snapshots", other))) others.add(ino);
  let freed = 0;
  const blobs = join(folder, "blobs");
  for (const name of existsSync(blobs) ? readdirSync(blobs) : []) {
    const at = join(blobs, name);
    const s = lstatSync(at);
    if (!s.isFile()) continue;
    const ino = s.ino.toString();
    if (mine.has(ino) && !others.has(ino)) {
      freed += s.size;
      rmSync(at);
    }
  }
  rmSync(snap, { recursive: true, force: true });
  const refs = join(folder, "refs");
  for (const ref of existsSync(refs) ? readdirSync(refs) : []) {
    if (readFileSync(join(refs, ref), "utf8").trim() === commit) rmSync(join(refs, ref));
  }
  return freed;
}

export function runModels(args: readonly string[], dataDir: string, env: HubEnv, out: (line: string) => void): number {
  const [command, ...rest] = args;
  if (command === undefined || command === "--help" || command === "-h") {
    out(MODELS_HELP.trimEnd());
    return command === undefined ? 2 : 0;
  }
  const models = listPulled(dataDir);
  if (command === "list" || command === "ls") {
    out(models.length === 0 ? `no pulled models in ${join(dataDir, "models")} (npx tessera pull <org/name>)` : modelsTable(models));
    return 0;
  }
  if (command === "rm") {
    const keepCache = rest.includes("--keep-cache");
    const names = rest.filter((a) => a !== "--keep-cache");
    if (names.length !== 1) throw new PullError("tessera models rm takes one model: its repo id or an alias");
    const name = names[0]!;
    const m = models.find((x) => x.repo === name || x.aliases.includes(name));
    if (m === undefined) throw new PullError(`no pulled model "${name}" in ${join(dataDir, "models")} (tessera models list)`);
    const folder = pulledFolder(dataDir, m.repo);
    const local = du(folder);
    rmSync(folder, { recursive: true, force: true });
    const cache = keepCache ? 0 : removeCachedRevision(env, m.repo, m.commit);
    out(
      `removed ${m.repo}: ${formatBytes(local)} from ${folder}${keepCache ? " (Hugging Face cache kept)" : `, ${formatBytes(cache)} from the Hugging Face cache`}`,
    );
    return 0;
  }
  throw new PullError(`tessera models: unknown command "${command}" (list, rm)`);
}
