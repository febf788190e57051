import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { getRepoFolderName } from "@huggingface/hub";
import lockfile from "proper-lockfile";

// One `tessera pull` of a repository at a time across the processes sharing a Hugging Face
// cache (two terminals, `serve --model` beside `pull`): two at once appended to the same
// blobs/<etag>.incomplete and converted into the same folder. The lock is proper-lockfile's
// (a directory made atomically, its mtime refreshed while held), at
// <cache>/.locks/models--org--name/tessera-pull.lock, beside huggingface_hub's own locks; one a
// killed pull left is taken over once it is STALE_MS old. huggingface_hub's per-blob locks are
// flock(2) files, which Node cannot take: a Python download of the same repository at the same
// moment is not excluded.

const STALE_MS = 30_000;
const UPDATE_MS = 5_000;

export interface PullLockEvents {
  /** Another pull holds the lock; this one waits for it. */
  waiting(lockPath: string): void;
  /** The lock could not be kept (its folder removed, or refreshed too late): the pull goes on unprotected. */
  lost(reason: string): void;
}

/** Takes the repository's pull lock, waiting as long as another pull holds it; resolves with its release. */
export async function lockRepoPull(cacheDir: string, repo: string, events: PullLockEvents): Promise<() => Promise<void>> {
  const folder = join(cacheDir, ".locks", getRepoFolderName({ type: "model", name: repo }));
  const target = join(folder, "tessera-pull");
  const lockfilePath = `${target}.lock`;
  const options = {
    realpath: false,
    lockfilePath,
    stale: STALE_MS,
    update: UPDATE_MS,
    onCompromised: (err: Error) => events.lost(err.message),
  };
  try {
    mkdirSync(folder, { recursive: true });
    return await lockfile.lock(target, options);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A cache this user cannot write (a read-only mount read with HF_HUB_OFFLINE): nothing to protect.
    if (code === "EACCES" || code === "EROFS" || code === "EPERM") return async () => {};
    if (code !== "ELOCKED") throw err;
  }
  events.waiting(lockfilePath);
  return lockfile.lock(target, { ...options, retries: { forever: true, minTimeout: 250, maxTimeout: 2_000, factor: 1.5 } });
}
