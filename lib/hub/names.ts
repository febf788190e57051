import { PullError } from "./errors.js";

// What a repository may name. Its ids and file names come from a server we do not control:
// nothing it lists may place a file outside the repository's folder of the cache.

const REPO_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}\/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$/;
const REVISION = /^[A-Za-z0-9][A-Za-z0-9_./-]{0,254}$/;
export const COMMIT = /^[0-9a-f]{40}$/;

export interface RepoRef {
  repo: string;
  /** A branch, tag or commit; `main` when none is given. */
  revision: string;
}

/** `org/name[@revision]`, checked: one slash, no `--` or `..` (the cache folder name must map back). */
export function parseRepoRef(text: string): RepoRef {
  const at = text.indexOf("@");
  const repo = at < 0 ? text : text.slice(0, at);
  const revision = at < 0 ? "main" : text.slice(at + 1);
  if (!REPO_ID.test(repo) || repo.includes("--") || repo.includes(".."))
    throw new PullError(`"${repo}" is not a Hugging Face model id (org/name, e.g. JetLM/SDAR-1.7B-Chat)`);
  if (!REVISION.test(revision) || revision.includes(".."))
    throw new PullError(`"${revision}" is not a revision (a branch, tag or 40-hex commit)`);
  return { repo, revision };
}

/**
 * Refuses the listing unless every name is a plain relative POSIX path: not absolute, no
 * drive or backslash, no `.`/`..`/empty segment, no NUL, and no two names that land on the
 * same file or where one is a folder of the other (also when differing only in case, which
 * collides on macOS and Windows).
 */
export function checkFileNames(repo: string, paths: readonly string[]): void {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const name of paths) {
    const segments = name.split("/");
    if (
      name === "" ||
      name.startsWith("/") ||
      name.includes("\\") ||
      name.includes("\0") ||
      /^[A-Za-z]:/.test(name) ||
      segments.some((s) => s === "" || s === "." || s === "..")
    ) {
      problems.push(`${JSON.stringify(name)} is absolute or climbs out of the repository`);
      continue;
    }
    const key = name.toLowerCase();
    const other = seen.get(key);
    if (other !== undefined) problems.push(`${JSON.stringify(name)} collides with ${JSON.stringify(other)}`);
    seen.set(key, name);
  }
  for (const [key, name] of seen) {
    const parts = key.split("/");
    for (let i = 1; i < parts.length; i++) {
      const folder = seen.get(parts.slice(0, i).join("/"));
      if (folder !== undefined) problems.push(`${JSON.stringify(name)} needs ${JSON.stringify(folder)} to be a folder, but it is a file`);
    }
  }
  if (problems.length > 0) throw new PullError(`${repo}: refused, its file list is unsafe: ${problems.slice(0, 3).join("; ")}`);
}
