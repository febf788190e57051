import { createHash } from "node:crypto";
import { createReadStream, existsSync, lstatSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { HubApiError, listFiles, modelInfo } from "@huggingface/hub";
import {
  blobPath,
  cachedBlobSize,
  ensureRealDirs,
  linkSnapshotFile,
  listSnapshot,
  readRef,
  repoFolder,
  snapshotDir,
  writeRef,
} from "./cache.js";
import { downloadBlob } from "./download.js";
import type { HubEnv } from "./env.js";
import { PullError } from "./errors.js";
import { repoKind, type RepoKind, supportedList } from "./families.js";
import type { HubHttp } from "./http.js";
import { checkFileNames, COMMIT, type RepoRef } from "./names.js";

// A revision of a model repository into the Hugging Face cache: resolve it to a commit, list
// its files, read config.json and refuse a family the converter does not take (before any
// weight byte), then fetch what is missing, a few files at a time, each verified.

export interface RepoFile {
  path: string;
  size: number;
  /** The blob's name: the LFS sha256, or the git blob sha1 of a small file. */
  etag: string;
  lfs: boolean;
}

export interface Snapshot {
  repo: string;
  revision: string;
  commit: string;
  /** snapshots/<commit> in the cache. */
  dir: string;
  files: RepoFile[];
  kind: RepoKind;
  config: Record<string, unknown>;
  /** Bytes fetched by this pull (0 when everything was in the cache). */
  fetchedBytes: number;
}

export interface SnapshotProgress {
  /** The bytes this pull will fetch, once known. */
  start(totalBytes: number, files: number): void;
  bytes(n: number): void;
  log(line: string): void;
}

export interface PullSnapshotOptions {
  ref: RepoRef;
  env: HubEnv;
  http: HubHttp;
  /** Files fetched at once (default 4). */
  concurrency?: number;
  progress?: SnapshotProgress;
  /** A commit an earlier pull verified, and its files (the data directory's manifest): its blobs are not hashed again, and offline these files must all be present. */
  verified?: { commit: string; files: readonly RepoFile[] };
  stallMs?: number;
  backoffMs?: number;
}

/** Weight formats a converter or runtime could want; only the safetensors are fetched when a repo has them. */
const OTHER_WEIGHTS = /\.(bin|pt|pth|ckpt|h5|msgpack|gguf|ot|onnx_data)$/i;
/** Repository code: never fetched, never run (auto_map is ignored). */
const CODE = /\.(py|pyc|so|dylib|dll|sh|ipynb)$/i;

/** Which of the listed files a pull fetches: everything but code, .gitattributes, and other weight formats beside safetensors. */
export function wantedFiles(files: readonly RepoFile[]): { wanted: RepoFile[]; skipped: RepoFile[] } {
  const safetensors = files.some((f) => f.path.endsWith(".safetensors"));
  const wanted: RepoFile[] = [];
  const skipped: RepoFile[] = [];
  for (const f of files) {
    const skip =
      f.path === ".gitattributes" || CODE.test(f.path) || (safetensors && OTHER_WEIGHTS.test(f.path) && !f.path.endsWith(".onnx"));
    (skip ? skipped : wanted).push(f);
  }
  return { wanted, skipped };
}

function hubMessage(err: unknown, ref: RepoRef, env: HubEnv): PullError | undefined {
  const status = err instanceof HubApiError ? err.statusCode : undefined;
  const page = `${env.endpoint}/${ref.repo}`;
  if (status === 401 || status === 403) {
    return new PullError(
      env.token === undefined
        ? `${ref.repo} is gated or private (HTTP ${status}): set HF_TOKEN to a token of an account that has accepted its terms on ${page}`
        : `${ref.repo}: HF_TOKEN was refused (HTTP ${status}): accept the model's terms on ${page} with that token's account, or check the token`,
    );
  }
  if (status === 404) {
    return new PullError(
      `${ref.repo}@${ref.revision}: not found on ${env.endpoint} (no such model or revision${env.token === undefined ? "; a private one needs HF_TOKEN" : ""})`,
    );
  }
  return undefined;
}

function resolveUrl(env: HubEnv, repo: string, commit: string, path: string): string {
  return `${env.endpoint}/${repo}/resolve/${commit}/${path.split("/").map(encodeURIComponent).join("/")}`;
}

async function hashFile(path: string, file: RepoFile): Promise<string> {
  const hash = file.lfs ? createHash("sha256") : createHash("sha1").update(`blob ${file.size}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function parseConfig(text: string, repo: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new PullError(`${repo}: config.json is not a JSON object`);
}

function checkKind(config: Record<string, unknown>, repo: string): RepoKind {
  const kind = repoKind(config);
  if (kind === undefined) {
    const type = config["model_type"];
    throw new PullError(
      `${repo}: model_type ${JSON.stringify(type ?? null)} is not a family Tessera converts (it takes ${supportedList()}, or a Tessera model directory); nothing downloaded but config.json`,
    );
  }
  return kind;
}

export async function pullSnapshot(options: PullSnapshotOptions): Promise<Snapshot> {
  const { ref, env, http } = options;
  const folder = repoFolder(env.cacheDir, ref.repo);
  if (env.offline) return offlineSnapshot(options, folder);

  let commit: string;
  let files: RepoFile[];
  // The token goes in through http.fetch (to the Hub's host only), not as the library's
  // accessToken, which refuses any token not starting with hf_ (mirrors and enterprise Hubs issue others).
  const common = { hubUrl: env.endpoint, fetch: http.fetch };
  try {
    const info = await modelInfo({ ...common, name: ref.repo, revision: ref.revision, additionalFields: ["sha"] });
    if (typeof info.sha !== "string" || !COMMIT.test(info.sha))
      throw new PullError(`${ref.repo}: the Hub gave no commit for ${ref.revision}`);
    commit = info.sha;
    files = [];
    for await (const entry of listFiles({ ...common, repo: { type: "model", name: ref.repo }, revision: commit, recursive: true })) {
      if (entry.type !== "file") continue;
      const etag = entry.lfs?.oid ?? entry.oid;
      if (typeof etag !== "string" || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(etag))
        throw new PullError(`${ref.repo}: the listing gives ${JSON.stringify(entry.path)} no usable oid`);
      files.push({ path: entry.path, size: entry.lfs?.size ?? entry.size, etag, lfs: entry.lfs !== undefined });
    }
  } catch (err) {
    throw hubMessage(err, ref, env) ?? err;
  }
  checkFileNames(
    ref.repo,
    files.map((f) => f.path),
  );
  const configFile = files.find((f) => f.path === "config.json");
  if (configFile === undefined) throw new PullError(`${ref.repo}@${commit.slice(0, 12)} has no config.json: not a model Tessera can serve`);

  ensureRealDirs(env.cacheDir, join(folder, "blobs"));
  const fetch = async (file: RepoFile) => {
    const target = blobPath(folder, file.etag);
    if (!existsSync(target)) {
      try {
        await downloadBlob(
          {
            url: resolveUrl(env, ref.repo, commit, file.path),
            path: target,
            size: file.size,
            check: { kind: file.lfs ? "sha256" : "git-sha1", hex: file.etag },
            name: `${ref.repo}/${file.path}`,
          },
          {
            http,
            ...(options.progress
              ? { onBytes: (n: number) => options.progress?.bytes(n), log: (l: string) => options.progress?.log(l) }
              : {}),
            ...(options.stallMs !== undefined ? { stallMs: options.stallMs } : {}),
            ...(options.backoffMs !== undefined ? { backoffMs: options.backoffMs } : {}),
          },
        );
      } catch (err) {
        const status = /answered (\d{3})$/.exec((err as Error).message)?.[1];
        if (status !== undefined) throw hubMessage(Object.assign(new HubApiError("", Number(status)), {}), ref, env) ?? err;
        throw err;
      }
    }
    linkSnapshotFile(folder, commit, file.path, file.etag);
  };

  // A blob already in the cache (ours, or another client's) is used when its size is right and,
  // unless this revision was verified by an earlier pull, its hash too (read, not fetched).
  const reuse = async (f: RepoFile): Promise<boolean> => {
    const blob = blobPath(folder, f.etag);
    let size: number;
    try {
      size = lstatSync(blob).isFile() ? statSync(blob).size : -1;
    } catch {
      return false;
    }
    if (size === f.size && (options.verified?.commit === commit || (await hashFile(blob, f)) === f.etag)) {
      linkSnapshotFile(folder, commit, f.path, f.etag);
      return true;
    }
    options.progress?.log(`${f.path}: the cached blob does not match its ${f.lfs ? "sha256" : "size"}: deleted, fetching it again`);
    rmSync(blob, { force: true });
    return false;
  };

  // config.json first: an unsupported family is refused before any weight byte.
  const fetched0 = http.bytes;
  if (!(await reuse(configFile))) await fetch(configFile);
  const config = parseConfig(readFileSync(join(snapshotDir(folder, commit), "config.json"), "utf8"), ref.repo);
  const kind = checkKind(config, ref.repo);
  if (config["auto_map"] !== undefined)
    options.progress?.log(`${ref.repo}: config.json's auto_map is ignored: Tessera never runs code from a repository`);

  const { wanted, skipped } = wantedFiles(files);
  if (skipped.length > 0)
    options.progress?.log(`not fetched (code, or weights in another format than safetensors): ${skipped.map((f) => f.path).join(", ")}`);
  const missing: RepoFile[] = [];
  for (const f of wanted) if (f !== configFile && !(await reuse(f))) missing.push(f);
  options.progress?.start(
    missing.reduce((n, f) => n + f.size, 0),
    missing.length,
  );
  const queue = [...new Map(missing.map((f) => [f.etag, f])).values()];
  const workers = Array.from({ length: Math.min(options.concurrency ?? 4, queue.length) }, async () => {
    for (let f = queue.shift(); f !== undefined; f = queue.shift()) await fetch(f);
  });
  await Promise.all(workers);
  // Files sharing a blob with one just fetched get their pointer too.
  for (const f of wanted) if (cachedBlobSize(folder, commit, f.path, f.etag) !== f.size) linkSnapshotFile(folder, commit, f.path, f.etag);
  writeRef(folder, ref.revision, commit);
  return {
    repo: ref.repo,
    revision: ref.revision,
    commit,
    dir: snapshotDir(folder, commit),
    files: wanted,
    kind,
    config,
    fetchedBytes: http.bytes - fetched0,
  };
}

function offlineSnapshot(options: PullSnapshotOptions, folder: string): Snapshot {
  const { ref } = options;
  const commit = COMMIT.test(ref.revision) ? ref.revision : readRef(folder, ref.revision);
  if (commit === undefined)
    throw new PullError(
      `HF_HUB_OFFLINE is set and ${ref.repo}@${ref.revision} is not in the cache (${folder}/refs/${ref.revision} is missing)`,
    );
  const found = listSnapshot(folder, commit);
  const known = options.verified?.commit === commit ? options.verified.files : undefined;
  const files: RepoFile[] = known !== undefined ? [...known] : [...found].map(([path, size]) => ({ path, size, etag: "", lfs: false }));
  const needed = known?.map((f) => f.path) ?? ["config.json", ...indexShards(folder, commit)];
  const lacking = needed.filter((p) => !found.has(p));
  if (lacking.length > 0)
    throw new PullError(
      `HF_HUB_OFFLINE is set and ${ref.repo}@${commit.slice(0, 12)} is incomplete in the cache: missing ${lacking.slice(0, 5).join(", ")}${lacking.length > 5 ? ` and ${lacking.length - 5} more` : ""}`,
    );
  const config = parseConfig(readFileSync(join(snapshotDir(folder, commit), "config.json"), "utf8"), ref.repo);
  return {
    repo: ref.repo,
    revision: ref.revision,
    commit,
    dir: snapshotDir(folder, commit),
    files,
    kind: checkKind(config, ref.repo),
    config,
    fetchedBytes: 0,
  };
}

/** The shards a safetensors index names (offline, with no listing to say what the revision holds). */
function indexShards(folder: string, commit: string): string[] {
  const index = join(snapshotDir(folder, commit), "model.safetensors.index.json");
  if (!existsSync(index)) return [];
  try {
    const map = (JSON.parse(readFileSync(index, "utf8")) as { weight_map?: Record<string, string> }).weight_map ?? {};
    return ["model.safetensors.index.json", ...new Set(Object.values(map))];
  } catch {
    return ["model.safetensors.index.json"];
  }
}
