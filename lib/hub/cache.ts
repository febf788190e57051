import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { getRepoFolderName } from "@huggingface/hub";
import { PullError } from "./errors.js";

// The Hugging Face cache layout (what huggingface_hub, transformers and vLLM read and write):
//   <cache>/models--org--name/blobs/<etag>            the bytes; etag = sha256 (LFS) or git blob sha1
//   <cache>/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<etag> (relative symlinks)
//   <cache>/models--org--name/refs/<revision>          the commit a branch or tag pointed to
// Only paths inside the repository's folder are written; no symlink found there is followed
// except a snapshot's pointer, and that only when it names its own blob.

export function repoFolder(cacheDir: string, repo: string): string {
  return join(cacheDir, getRepoFolderName({ type: "model", name: repo }));
}

export function blobPath(folder: string, etag: string): string {
  return join(folder, "blobs", etag);
}

export function snapshotDir(folder: string, commit: string): string {
  return join(folder, "snapshots", commit);
}

export function readRef(folder: string, revision: string): string | undefined {
  try {
    const commit = readFileSync(join(folder, "refs", revision), "utf8").trim();
    return /^[0-9a-f]{40}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}

export function writeRef(folder: string, revision: string, commit: string): void {
  if (revision === commit) return;
  const file = join(folder, "refs", revision);
  ensureRealDirs(folder, dirname(file));
  writeFileSync(file, commit);
}

/** The kind of thing at `path`, without following a symlink. */
function kindOf(path: string): "missing" | "dir" | "file" | "link" | "other" {
  try {
    const s = lstatSync(path);
    return s.isSymbolicLink() ? "link" : s.isDirectory() ? "dir" : s.isFile() ? "file" : "other";
  } catch {
    return "missing";
  }
}

/** Creates `dir` under `root`, refusing any step of it that exists as a symlink or a file. */
export function ensureRealDirs(root: string, dir: string): void {
  const rel = relative(root, dir);
  if (rel.startsWith("..") || resolve(root, rel) !== resolve(dir)) throw new PullError(`${dir} is outside ${root}`);
  mkdirSync(root, { recursive: true });
  let at = root;
  for (const part of rel === "" ? [] : rel.split(sep)) {
    at = join(at, part);
    const kind = kindOf(at);
    if (kind === "missing") mkdirSync(at);
    else if (kind !== "dir")
      throw new PullError(`${at} is a ${kind === "link" ? "symlink" : "file"} where a folder belongs in the cache: refused`);
  }
}

/** Size of the blob a snapshot file points to, when the pointer is a symlink to exactly `blobs/<etag>` and that blob is a plain file. */
export function cachedBlobSize(folder: string, commit: string, path: string, etag: string): number | undefined {
  const pointer = join(snapshotDir(folder, commit), path);
  if (kindOf(pointer) !== "link") return undefined;
  if (resolve(dirname(pointer), readlinkSync(pointer)) !== blobPath(folder, etag)) return undefined;
  try {
    const s = lstatSync(blobPath(folder, etag));
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

/** Points snapshots/<commit>/<path> at blobs/<etag> with a relative symlink, replacing whatever pointer was there. */
export function linkSnapshotFile(folder: string, commit: string, path: string, etag: string): void {
  const pointer = join(snapshotDir(folder, commit), path);
  ensureRealDirs(folder, dirname(pointer));
  const kind = kindOf(pointer);
  if (kind === "dir" || kind === "other") throw new PullError(`${pointer} is a ${kind === "dir" ? "folder" : "special file"}: refused`);
  if (kind !== "missing") unlinkSync(pointer); // a link or file is removed, never followed
  symlinkSync(relative(dirname(pointer), blobPath(folder, etag)), pointer);
}

/**
 * The files of a snapshot as found on disk (offline): path -> blob size, for pointers that are
 * symlinks into this repository's blobs/ only; anything else is left out.
 */
export function listSnapshot(folder: string, commit: string): Map<string, number> {
  const root = snapshotDir(folder, commit);
  const blobs = join(folder, "blobs") + sep;
  const found = new Map<string, number>();
  const walk = (dir: string, prefix: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const at = join(dir, name);
      const kind = kindOf(at);
      if (kind === "dir") walk(at, `${prefix}${name}/`);
      else if (kind === "link") {
        const target = resolve(dir, readlinkSync(at));
        if (!target.startsWith(blobs) || kindOf(target) !== "file") continue;
        found.set(`${prefix}${name}`, lstatSync(target).size);
      }
    }
  };
  walk(root, "");
  return found;
}
