import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import type { Config } from "../lib/config.js";
import { type HubEnv, hubEnv } from "../lib/hub/env.js";
import { PullError } from "../lib/hub/errors.js";
import { HubHttp } from "../lib/hub/http.js";
import { parseRepoRef, type RepoRef } from "../lib/hub/names.js";
import { createPullProgress, formatBytes, type PullProgress } from "../lib/hub/progress.js";
import { lockRepoPull } from "../lib/hub/pull-lock.js";
import { pullSnapshot, type Snapshot } from "../lib/hub/snapshot.js";
import { type PulledManifest, pulledFolder, readManifest, writeManifest } from "../services/registry/pulled.js";
import { convertDir, convertPython, runConvert, SETUP_COMMAND, setupVenv } from "./convert-command.js";

export const PULL_HELP = `Usage:
  tessera pull <org/name>[@revision] [--as NAME] [--weights int8|int4|fp16|fp32] [--block-size N] [--no-setup]
      Download a model from the Hugging Face Hub into the Hugging Face cache (HF_HUB_CACHE,
      else HF_HOME/hub, else ~/.cache/huggingface/hub: shared with huggingface-cli, transformers
      and vLLM), convert it (SDAR, Fast-dLLM v2, DiffusionGemma checkpoints; int8 unless --weights
      says otherwise; cached by repo, commit and weights), and record it in TESSERA_DATA_DIR/models
      so that \`tessera serve\` serves it under its repo id (--as NAME: an alias too). A repository
      that holds a Tessera model directory is served as published, with no Python.
      The converter's Python environment (convert/.venv) is created on first need unless
      --no-setup. HF_ENDPOINT: a mirror; HF_TOKEN: gated or private models; HF_HUB_OFFLINE=1:
      the cache only, not a single request.
`;

const WEIGHTS = ["int8", "int4", "fp16", "fp32"] as const;
const ALIAS = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export interface PullOptions {
  ref: RepoRef;
  dataDir: string;
  env: HubEnv;
  aliases?: string[];
  weights?: (typeof WEIGHTS)[number];
  blockSize?: number;
  /** Refuse instead of creating convert/.venv. */
  noSetup?: boolean;
  /** TESSERA_CONVERT_PYTHON ("" for convert/.venv's). */
  python?: string;
  /** The converter's folder (convert/ of this installation unless a test names another). */
  convertRoot?: string;
  progress?: PullProgress;
  http?: HubHttp;
  stallMs?: number;
  backoffMs?: number;
}

export interface PullResult {
  manifest: PulledManifest;
  snapshot: Snapshot;
  http: HubHttp;
  /** The model directory was already there (a cached conversion or link set). */
  cached: boolean;
}

function sizeOf(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.size;
  return readdirSync(path).reduce((n, name) => n + sizeOf(join(path, name)), 0);
}

/** A Tessera model repository as a real directory: hard links to the cache's blobs (copies across file systems). */
function linkModelDir(snapshot: Snapshot, dir: string, progress: PullProgress | undefined): void {
  const staging = `${dir}.linking-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  let copied = 0;
  for (const f of snapshot.files) {
    const to = join(staging, f.path);
    mkdirSync(dirname(to), { recursive: true });
    // The blob the pointer names (link(2) would link the symlink itself), checked to be the cache's.
    const from = realpathSync(join(snapshot.dir, f.path));
    if (!from.startsWith(join(realpathSync(snapshot.dir), "../../blobs") + sep))
      throw new PullError(`${f.path}: its pointer leaves the cache's blobs/: refused`);
    try {
      linkSync(from, to);
    } catch {
      copyFileSync(from, to);
      copied += f.size;
    }
  }
  if (copied > 0) progress?.log(`copied ${formatBytes(copied)} (the HF cache is on another file system than the data directory)`);
  rmSync(dir, { recursive: true, force: true }); // an incomplete one
  renameSync(staging, dir);
}

async function ensurePython(options: PullOptions): Promise<string> {
  const configured = options.python ?? "";
  const root = options.convertRoot ?? convertDir();
  const python = convertPython(configured, root);
  if (configured !== "" || python !== "python3") return python;
  const venv = join(root, ".venv");
  if (options.noSetup)
    throw new PullError(`the converter's Python environment ${venv} does not exist (--no-setup): create it with \`${SETUP_COMMAND}\``);
  options.progress?.phase(
    "setup",
    `creating ${venv}: PyTorch (CPU), ONNX Runtime, transformers from convert/requirements.txt, about 1 GB, once`,
  );
  const status = await setupVenv(root);
  if (status !== 0) throw new PullError(`creating ${venv} failed (exit ${status}); retry with \`${SETUP_COMMAND}\``);
  return convertPython("", root);
}

/** tessera pull: the snapshot into the HF cache, the conversion (cached), the manifest; one pull of a repository at a time. */
export async function pullModel(options: PullOptions): Promise<PullResult> {
  const { ref, env, progress } = options;
  for (const alias of options.aliases ?? [])
    if (!ALIAS.test(alias))
      throw new PullError(`--as ${JSON.stringify(alias)}: an alias is 1-128 letters, digits, . _ : - (starting with a letter or digit)`);
  const release = await lockRepoPull(env.cacheDir, ref.repo, {
    waiting: (lock) => progress?.log(`another tessera pull of ${ref.repo} is running (${lock}); waiting for it to finish`),
    lost: (reason) => progress?.log(`the pull lock of ${ref.repo} was lost (${reason}); going on without it`),
  });
  try {
    return await pullLocked(options);
  } finally {
    await release().catch(() => {}); // already released where the lock was lost
  }
}

async function pullLocked(options: PullOptions): Promise<PullResult> {
  const { ref, env, dataDir, progress } = options;
  const http = options.http ?? new HubHttp(env);
  const previous = readManifest(dataDir, ref.repo);
  progress?.phase("resolve", `${ref.repo}@${ref.revision} on ${env.offline ? "the cache (HF_HUB_OFFLINE)" : env.endpoint}`);
  const snapshot = await pullSnapshot({
    ref,
    env,
    http,
    ...(progress ? { progress } : {}),
    ...(previous !== undefined ? { verified: { commit: previous.commit, files: previous.files } } : {}),
    ...(options.stallMs !== undefined ? { stallMs: options.stallMs } : {}),
    ...(options.backoffMs !== undefined ? { backoffMs: options.backoffMs } : {}),
  });
  const folder = pulledFolder(dataDir, ref.repo);
  const checkpointBytes = snapshot.files.reduce((n, f) => n + f.size, 0);
  let dir: string;
  let weights: string;
  let family: string;
  let cached: boolean;
  if (snapshot.kind.kind === "tessera") {
    dir = join(folder, snapshot.commit);
    weights = "published";
    family = snapshot.kind.family;
    cached = existsSync(join(dir, "config.json"));
    if (!cached) {
      progress?.phase("link", `a Tessera model directory: no conversion, no Python; linking its files into ${dir}`);
      mkdirSync(folder, { recursive: true });
      linkModelDir(snapshot, dir, progress);
    }
  } else {
    weights = options.weights ?? "int8";
    family = snapshot.kind.family.family;
    dir = join(folder, `${snapshot.commit}-${weights}${options.blockSize !== undefined ? `-b${options.blockSize}` : ""}`);
    cached = existsSync(join(dir, "config.json"));
    if (cached) progress?.phase("convert", `cached: ${dir}`);
    else {
      if (env.offline && options.python === undefined && convertPython("") === "python3")
        throw new PullError(
          `HF_HUB_OFFLINE is set and the converter's environment (convert/.venv) is missing: it cannot be installed offline`,
        );
      const python = await ensurePython(options);
      const args = [
        snapshot.dir,
        dir,
        "--weights",
        weights,
        ...(options.blockSize !== undefined ? ["--block-size", String(options.blockSize)] : []),
      ];
      progress?.phase("convert", `${snapshot.kind.family.label} -> ${weights} in ${dir} (${python})`);
      mkdirSync(folder, { recursive: true });
      const status = await runConvert(args, python);
      if (status !== 0)
        throw new PullError(
          `converting ${ref.repo}@${snapshot.commit.slice(0, 12)} failed (exit ${status}); the converter's message is above`,
        );
    }
  }
  progress?.phase("check", `${dir}: ${existsSync(join(dir, "config.json")) ? "config.json present" : "config.json missing"}`);
  if (!existsSync(join(dir, "config.json"))) throw new PullError(`${dir} has no config.json: not a model directory`);
  const manifest: PulledManifest = {
    version: 1,
    repo: ref.repo,
    revision: ref.revision,
    commit: snapshot.commit,
    family,
    weights,
    blockSize: options.blockSize,
    aliases: [...new Set([...(previous?.aliases ?? []), ...(options.aliases ?? [])])],
    path: dir,
    sizeBytes: sizeOf(dir),
    checkpointBytes,
    source: snapshot.kind.kind === "tessera" ? "tessera" : "converted",
    files: snapshot.files,
    pulledAt: previous?.commit === snapshot.commit && previous.path === dir ? previous.pulledAt : new Date().toISOString(),
  };
  writeManifest(dataDir, manifest);
  progress?.phase(
    "ready",
    `${ref.repo}@${snapshot.commit.slice(0, 12)} (${weights}) in ${dir}; serve it with \`npx tessera serve --model ${ref.repo}\``,
  );
  progress?.done();
  return { manifest, snapshot, http, cached };
}

/** Parses `pull`'s arguments (and `serve --model`'s pull flags). */
export function parsePullArgs(args: readonly string[]): Omit<PullOptions, "dataDir" | "env"> & { rest: string[] } {
  const rest: string[] = [];
  const aliases: string[] = [];
  let weights: PullOptions["weights"];
  let blockSize: number | undefined;
  let noSetup = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const value = () => {
      const v = args[++i];
      if (v === undefined) throw new PullError(`${a} needs a value`);
      return v;
    };
    if (a === "--as") aliases.push(value());
    else if (a === "--weights") {
      const w = value();
      if (!(WEIGHTS as readonly string[]).includes(w)) throw new PullError(`--weights ${w}: one of ${WEIGHTS.join(", ")}`);
      weights = w as PullOptions["weights"];
    } else if (a === "--block-size") {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1 || n > 4096) throw new PullError(`--block-size must be an integer from 1 to 4096`);
      blockSize = n;
    } else if (a === "--no-setup") noSetup = true;
    else rest.push(a);
  }
  const [first] = rest;
  return {
    ref: first === undefined || first.startsWith("-") ? { repo: "", revision: "main" } : parseRepoRef(first),
    aliases,
    ...(weights !== undefined ? { weights } : {}),
    ...(blockSize !== undefined ? { blockSize } : {}),
    noSetup,
    rest,
  };
}

export async function runPull(args: readonly string[], config: Pick<Config, "storage" | "hub">): Promise<number> {
  if (args.length === 0 || args.includes("--help") || args.includes("-h")) {
    process.stdout.write(PULL_HELP);
    return args.length === 0 ? 2 : 0;
  }
  const parsed = parsePullArgs(args);
  const extra = parsed.rest.slice(1);
  if (parsed.ref.repo === "" || extra.length > 0)
    throw new PullError(`unexpected ${JSON.stringify(extra[0] ?? parsed.rest[0])} (tessera pull --help)`);
  const progress = createPullProgress(process.stderr, parsed.ref.repo);
  const started = Date.now();
  const { manifest, http } = await pullModel({
    ...parsed,
    dataDir: config.storage.dataDir,
    env: hubEnv(),
    python: config.hub.convertPython,
    progress,
  });
  process.stderr.write(
    `${manifest.repo}: pulled in ${((Date.now() - started) / 1000).toFixed(1)} s: ${http.requests.length} requests, ${formatBytes(http.bytes)} fetched\n`,
  );
  process.stdout.write(`${manifest.repo}@${manifest.commit} ${manifest.weights} ${manifest.path}\n`);
  return 0;
}
