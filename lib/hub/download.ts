import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, renameSync, rmSync, statSync, truncateSync } from "node:fs";
import { once } from "node:events";
import { PullError } from "./errors.js";
import type { HubHttp } from "./http.js";

// One blob into the cache: written to blobs/<etag>.incomplete (the name huggingface_hub uses,
// so a transfer either client cut is resumed by the other), resumed with a Range request after
// a cut or a stall, hashed as it arrives and checked before it is renamed into place. A
// mismatch deletes the bytes and fetches the file again from the start; a second mismatch
// fails the pull. @huggingface/hub's downloadFileToCacheDir does none of this (it restarts
// from zero and checks nothing), so this step is ours, on its cache layout.

export interface BlobTarget {
  url: string;
  /** Final path, blobs/<etag>. */
  path: string;
  size: number;
  /** LFS files: the sha256 the listing gives; other files: their git blob sha1. */
  check: { kind: "sha256" | "git-sha1"; hex: string };
  name: string;
}

export interface DownloadOptions {
  http: HubHttp;
  /** No byte for this long: the request is aborted and resumed (default 30 s). */
  stallMs?: number;
  /** Tries after a cut, stall or server error (default 6), backing off 0.5 s, 1 s, 2 s … up to 8 s. */
  retries?: number;
  onBytes?: (n: number) => void;
  log?: (line: string) => void;
  /** Base of the backoff in ms (tests make it small). */
  backoffMs?: number;
}

function newHash(check: BlobTarget["check"], size: number): Hash {
  if (check.kind === "sha256") return createHash("sha256");
  return createHash("sha1").update(`blob ${size}\0`);
}

async function hashPrefix(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);

export async function downloadBlob(target: BlobTarget, options: DownloadOptions): Promise<void> {
  const { http } = options;
  const stallMs = options.stallMs ?? 30_000;
  const retries = options.retries ?? 6;
  const backoff = options.backoffMs ?? 500;
  const partial = `${target.path}.incomplete`;
  let mismatches = 0;
  let failures = 0;
  for (;;) {
    let have = existsSync(partial) ? statSync(partial).size : 0;
    if (have > target.size) {
      truncateSync(partial, 0);
      have = 0;
    }
    let hash = newHash(target.check, target.size);
    if (have > 0) await hashPrefix(hash, partial);
    try {
      if (have < target.size) hash = await fetchInto(target, partial, have, hash, http, stallMs, options.onBytes);
    } catch (err) {
      if (err instanceof PullError) throw err;
      failures += 1;
      if (failures > retries) throw new PullError(`${target.name}: download failed ${failures} times, last: ${(err as Error).message}`);
      const wait = Math.min(backoff * 2 ** (failures - 1), 8_000);
      options.log?.(`${target.name}: ${(err as Error).message}; resuming in ${(wait / 1000).toFixed(1)} s (try ${failures + 1})`);
      await new Promise((r) => setTimeout(r, wait));
      continue;
    }
    const got = hash.digest("hex");
    if (got === target.check.hex) {
      renameSync(partial, target.path);
      return;
    }
    rmSync(partial, { force: true });
    mismatches += 1;
    if (mismatches >= 2)
      throw new PullError(
        `${target.name}: ${target.check.kind} mismatch twice (expected ${target.check.hex}, got ${got}); nothing of it is kept`,
      );
    options.log?.(`${target.name}: ${target.check.kind} mismatch (expected ${target.check.hex}, got ${got}): deleted, fetching it again`);
  }
}

class Retryable extends Error {}

async function fetchInto(
  target: BlobTarget,
  partial: string,
  have: number,
  hash: Hash,
  http: HubHttp,
  stallMs: number,
  onBytes: ((n: number) => void) | undefined,
): Promise<Hash> {
  const abort = new AbortController();
  let timer = setTimeout(() => abort.abort(), stallMs);
  const poke = () => {
    clearTimeout(timer);
    timer = setTimeout(() => abort.abort(), stallMs);
  };
  try {
    const headers: Record<string, string> = have > 0 ? { range: `bytes=${have}-` } : {};
    let res: Response;
    try {
      res = await http.fetch(target.url, { headers, signal: abort.signal });
    } catch (err) {
      if (err instanceof PullError) throw err;
      throw new Retryable(abort.signal.aborted ? `no answer in ${stallMs / 1000} s` : (err as Error).message);
    }
    if (res.status === 401 || res.status === 403 || res.status === 404) {
      await res.body?.cancel();
      throw new PullError(`${target.name}: ${target.url} answered ${res.status}`);
    }
    if (RETRYABLE.has(res.status) || res.status === 416) {
      await res.body?.cancel();
      if (res.status === 416) truncateSync(partial, 0);
      throw new Retryable(`HTTP ${res.status}`);
    }
    let offset = have;
    if (res.status === 200 && have > 0) {
      // The server ignored the Range: start again from the first byte.
      offset = 0;
      truncateSync(partial, 0);
      hash = newHash(target.check, target.size);
      onBytes?.(-have);
    } else if (res.status === 206) {
      const start = Number(/^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "")?.[1]);
      if (start !== have) {
        await res.body?.cancel();
        truncateSync(partial, 0);
        throw new Retryable(`Content-Range starts at ${start}, not ${have}`);
      }
    } else if (res.status !== 200) {
      await res.body?.cancel();
      throw new PullError(`${target.name}: ${target.url} answered ${res.status}`);
    }
    if (res.body === null) throw new Retryable("empty body");
    const out = createWriteStream(partial, { flags: offset === 0 ? "w" : "a" });
    try {
      const reader = res.body.getReader();
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw new Retryable(abort.signal.aborted ? `stalled: no byte for ${stallMs / 1000} s` : `cut: ${(err as Error).message}`);
        }
        if (chunk.done) break;
        poke();
        offset += chunk.value.byteLength;
        if (offset > target.size) throw new PullError(`${target.name}: the server sent more than the ${target.size} bytes listed`);
        hash.update(chunk.value);
        onBytes?.(chunk.value.byteLength);
        if (!out.write(chunk.value)) await once(out, "drain");
      }
    } finally {
      out.end();
      await once(out, "close");
    }
    if (offset < target.size) throw new Retryable(`cut at ${offset} of ${target.size} bytes`);
    return hash;
  } finally {
    clearTimeout(timer);
  }
}
