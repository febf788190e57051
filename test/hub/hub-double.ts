// A Hugging Face Hub double: two real HTTP servers on 127.0.0.1, the Hub's API and `resolve`
// on one, the LFS bytes on a second "CDN" host the way the Hub redirects them, speaking what
// @huggingface/hub, tessera pull and huggingface_hub's snapshot_download use. Every request is
// logged (host, method, path, status, Range, body bytes sent) for the tests to count.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

export interface DoubleFile {
  data: Buffer;
  lfs: boolean;
  /** git blob sha1 (what the tree gives as oid, and the ETag of a small file). */
  oid: string;
  sha256: string;
}

export interface DoubleRepo {
  files: Map<string, DoubleFile>;
  commit: string;
  refs: Map<string, string>;
  /** Tokens that may download (gated); undefined: public. */
  gatedTokens: Set<string> | undefined;
}

export interface LoggedRequest {
  host: "hub" | "cdn";
  method: string;
  path: string;
  status: number;
  range: string | undefined;
  /** Body bytes sent. */
  bytes: number;
  /** The Authorization header it came with, if any. */
  auth: string | undefined;
}

const LFS_NAME = /\.(safetensors|onnx|data|bin|pt|gguf)$/;

function gitOid(data: Buffer): string {
  return createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
}

export function doubleFile(data: Buffer, lfs: boolean): DoubleFile {
  return { data, lfs, oid: gitOid(data), sha256: createHash("sha256").update(data).digest("hex") };
}

/** Every file under `dir`, by relative POSIX path. */
export function filesOf(dir: string, prefix = ""): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const name of readdirSync(dir).sort()) {
    const at = join(dir, name);
    if (statSync(at).isDirectory()) Object.assign(out, filesOf(at, `${prefix}${name}/`));
    else out[`${prefix}${name}`] = readFileSync(at);
  }
  return out;
}

export class HubDouble {
  readonly repos = new Map<string, DoubleRepo>();
  readonly log: LoggedRequest[] = [];
  /** Cut the connection after this many body bytes, on the next GET of a blob (by path). */
  readonly cuts = new Map<string, number>();
  /** Flip the byte at this offset of a blob's body, the next `times` it is sent (by path). */
  readonly corruptions = new Map<string, { at: number; times: number }>();
  /** Send only a few bytes, then nothing (a stall), on the next GET of a blob (by path). */
  readonly stalls = new Set<string>();
  /** Hold a blob's body until the promise settles (by path): a download in progress, for as long as a test needs. */
  readonly holds = new Map<string, Promise<unknown>>();
  /** Answer every Range with the whole file (a server that ignores Range). */
  ignoreRange = false;
  hubUrl = "";
  cdnUrl = "";
  private hub: Server | undefined;
  private cdn: Server | undefined;
  private readonly byEtag = new Map<string, { repo: string; path: string; file: DoubleFile }>();

  /** A repository at one commit; `main` points to it. Files ending like weights are LFS. */
  addRepo(
    repo: string,
    files: Record<string, Buffer | string>,
    options: { gatedTokens?: string[]; lfs?: (path: string) => boolean } = {},
  ): DoubleRepo {
    const map = new Map<string, DoubleFile>();
    const commitHash = createHash("sha1").update(repo);
    for (const [path, content] of Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const data = Buffer.isBuffer(content) ? content : Buffer.from(content);
      const file = doubleFile(data, options.lfs?.(path) ?? (LFS_NAME.test(path) || data.length > 10_000_000));
      map.set(path, file);
      commitHash.update(path).update(file.oid);
      if (file.lfs) this.byEtag.set(file.sha256, { repo, path, file });
    }
    const commit = commitHash.digest("hex");
    const entry: DoubleRepo = {
      files: map,
      commit,
      refs: new Map([["main", commit]]),
      gatedTokens: options.gatedTokens === undefined ? undefined : new Set(options.gatedTokens),
    };
    this.repos.set(repo, entry);
    return entry;
  }

  async start(): Promise<this> {
    this.hub = createServer((req, res) => this.serveHub(req, res));
    this.cdn = createServer((req, res) => this.serveCdn(req, res));
    const listen = (s: Server, host: string) =>
      new Promise<number>((resolve, reject) => {
        s.once("error", reject);
        s.listen(0, host, () => resolve((s.address() as AddressInfo).port));
      });
    this.hubUrl = `http://127.0.0.1:${await listen(this.hub, "127.0.0.1")}`;
    // The CDN on another host name, as the Hub's is (clients tell them apart by host name and
    // send the token to the Hub only): 127.0.0.2 (Linux routes all of 127/8 to loopback),
    // else `localhost`.
    try {
      this.cdnUrl = `http://127.0.0.2:${await listen(this.cdn, "127.0.0.2")}`;
    } catch {
      this.cdnUrl = `http://localhost:${await listen(this.cdn, "127.0.0.1")}`;
    }
    return this;
  }

  async close(): Promise<void> {
    for (const s of [this.hub, this.cdn]) {
      if (s === undefined) continue;
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  }

  /** Logged requests of one host (and method, path pattern). */
  requests(filter: { host?: "hub" | "cdn"; path?: RegExp } = {}): LoggedRequest[] {
    return this.log.filter(
      (r) => (filter.host === undefined || r.host === filter.host) && (filter.path === undefined || filter.path.test(r.path)),
    );
  }

  bytesSent(): number {
    return this.log.reduce((n, r) => n + r.bytes, 0);
  }

  /** Requests that fetch file bodies: GETs of resolve (small files) and of the CDN (LFS). */
  downloads(): LoggedRequest[] {
    return this.log.filter((r) => r.method === "GET" && (r.host === "cdn" || r.path.includes("/resolve/")) && r.status < 300);
  }

  private record(host: "hub" | "cdn", req: IncomingMessage, res: ServerResponse): LoggedRequest {
    const entry: LoggedRequest = {
      host,
      method: req.method ?? "GET",
      path: req.url ?? "/",
      status: 0,
      range: req.headers.range,
      bytes: 0,
      auth: req.headers.authorization,
    };
    this.log.push(entry);
    res.on("finish", () => (entry.status = res.statusCode));
    res.on("close", () => (entry.status ||= res.statusCode));
    return entry;
  }

  private error(res: ServerResponse, status: number, code: string, message: string): void {
    res.writeHead(status, { "content-type": "application/json", "x-error-code": code, "x-error-message": message });
    res.end(JSON.stringify({ error: message }));
  }

  private commitOf(repo: DoubleRepo, rev: string): string | undefined {
    const decoded = decodeURIComponent(rev);
    return decoded === repo.commit ? repo.commit : repo.refs.get(decoded);
  }

  private serveHub(req: IncomingMessage, res: ServerResponse): void {
    const entry = this.record("hub", req, res);
    const url = new URL(req.url ?? "/", "http://x");
    const api = /^\/api\/models\/([^/]+\/[^/]+)(?:\/(revision|tree)\/([^/]+)(?:\/(.*))?)?$/.exec(url.pathname);
    if (api !== null) {
      const [, name, what, rev = "main"] = api;
      const repo = this.repos.get(name!);
      if (repo === undefined) {
        this.error(res, 404, "RepoNotFound", `Repository not found: ${name}`);
        return;
      }
      const commit = this.commitOf(repo, rev);
      if (commit === undefined) {
        this.error(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
        return;
      }
      if (what === "tree") {
        this.json(res, entry, this.tree(repo));
        return;
      }
      this.json(res, entry, this.info(name!, repo, url.searchParams.get("blobs") === "true"));
      return;
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (resolve !== null && (req.method === "GET" || req.method === "HEAD")) {
      const [, name, rev, rawPath] = resolve;
      const repo = this.repos.get(name!);
      if (repo === undefined) {
        this.error(res, 404, "RepoNotFound", `Repository not found: ${name}`);
        return;
      }
      if (repo.gatedTokens !== undefined) {
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
        const refusal =
          token === undefined
            ? {
                status: 401,
                message: `Access to model ${name} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
              }
            : repo.gatedTokens.has(token)
              ? undefined
              : {
                  status: 403,
                  message: `Access to model ${name} is restricted and you are not in the authorized list. Visit https://huggingface.co/${name} to ask for access.`,
                };
        if (refusal !== undefined) {
          this.error(res, refusal.status, "GatedRepo", refusal.message);
          return;
        }
      }
      const commit = this.commitOf(repo, rev!);
      if (commit === undefined) {
        this.error(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
        return;
      }
      const path = rawPath!.split("/").map(decodeURIComponent).join("/");
      const file = repo.files.get(path);
      if (file === undefined) {
        this.error(res, 404, "EntryNotFound", `${path} does not exist at ${commit}`);
        return;
      }
      const common = {
        "x-repo-commit": commit,
        "accept-ranges": "bytes",
        "access-control-expose-headers": "X-Repo-Commit,X-Linked-Etag,X-Linked-Size,ETag",
      };
      if (file.lfs) {
        res.writeHead(302, {
          ...common,
          location: `${this.cdnUrl}/repos/${file.sha256}?X-Amz-Signature=double&response-content-disposition=${encodeURIComponent(path)}`,
          etag: `"${file.oid}"`,
          "x-linked-etag": `"${file.sha256}"`,
          "x-linked-size": String(file.data.length),
          "content-length": "0",
        });
        res.end();
        return;
      }
      this.body(req, res, entry, file, path, { ...common, etag: `"${file.oid}"` });
      return;
    }
    this.error(res, 404, "NotFound", `no route ${url.pathname}`);
  }

  private serveCdn(req: IncomingMessage, res: ServerResponse): void {
    const entry = this.record("cdn", req, res);
    const url = new URL(req.url ?? "/", "http://x");
    const found = /^\/repos\/([0-9a-f]{64})$/.exec(url.pathname);
    const blob = found === null ? undefined : this.byEtag.get(found[1]!);
    if (blob === undefined) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("NoSuchKey");
      return;
    }
    this.body(req, res, entry, blob.file, blob.path, { etag: `"${blob.file.sha256}"`, "accept-ranges": "bytes" });
  }

  private json(res: ServerResponse, entry: LoggedRequest, value: unknown): void {
    const body = Buffer.from(JSON.stringify(value));
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
    entry.bytes = body.length;
  }

  private info(name: string, repo: DoubleRepo, blobs: boolean) {
    return {
      _id: createHash("md5").update(name).digest("hex").slice(0, 24),
      id: name,
      modelId: name,
      author: name.split("/")[0],
      sha: repo.commit,
      lastModified: "2026-11-01T00:00:00.000Z",
      private: false,
      disabled: false,
      gated: repo.gatedTokens === undefined ? false : "manual",
      downloads: 0,
      likes: 0,
      tags: [],
      pipeline_tag: "text-generation",
      library_name: "transformers",
      siblings: [...repo.files].map(([path, f]) => ({
        rfilename: path,
        ...(blobs
          ? { size: f.data.length, blobId: f.oid, ...(f.lfs ? { lfs: { sha256: f.sha256, size: f.data.length, pointerSize: 134 } } : {}) }
          : {}),
      })),
      createdAt: "2026-11-01T00:00:00.000Z",
      usedStorage: [...repo.files.values()].reduce((n, f) => n + f.data.length, 0),
    };
  }

  private tree(repo: DoubleRepo) {
    const dirs = new Set<string>();
    for (const path of repo.files.keys()) {
      const parts = path.split("/");
      for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
    }
    return [
      ...[...dirs].map((path) => ({ type: "directory", oid: createHash("sha1").update(path).digest("hex"), size: 0, path })),
      ...[...repo.files].map(([path, f]) => ({
        type: "file",
        oid: f.oid,
        size: f.data.length,
        path,
        ...(f.lfs ? { lfs: { oid: f.sha256, size: f.data.length, pointerSize: 134 } } : {}),
      })),
    ];
  }

  /** The file's bytes, or the Range asked for, with the faults armed for it. */
  private body(
    req: IncomingMessage,
    res: ServerResponse,
    entry: LoggedRequest,
    file: DoubleFile,
    path: string,
    headers: Record<string, string>,
  ): void {
    const size = file.data.length;
    let start = 0;
    let end = size - 1;
    let status = 200;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (range !== null && !this.ignoreRange) {
      start = Number(range[1]);
      end = range[2] === "" ? size - 1 : Math.min(Number(range[2]), size - 1);
      if (start >= size) {
        res.writeHead(416, { "content-range": `bytes */${size}` });
        res.end();
        return;
      }
      status = 206;
      headers["content-range"] = `bytes ${start}-${end}/${size}`;
    }
    res.writeHead(status, { ...headers, "content-type": "application/octet-stream", "content-length": String(end - start + 1) });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const hold = this.holds.get(path);
    if (hold !== undefined) {
      this.holds.delete(path);
      res.write(file.data.subarray(start, start + 1024));
      start += 1024;
      entry.bytes += 1024;
      void hold.then(() => this.send(req, res, entry, file, path, start, end));
      return;
    }
    this.send(req, res, entry, file, path, start, end);
  }

  private send(
    _req: IncomingMessage,
    res: ServerResponse,
    entry: LoggedRequest,
    file: DoubleFile,
    path: string,
    start: number,
    end: number,
  ): void {
    let chunk = Buffer.from(file.data.subarray(start, end + 1));
    const corrupt = this.corruptions.get(path);
    if (corrupt !== undefined && corrupt.times > 0 && corrupt.at >= start && corrupt.at <= end) {
      corrupt.times -= 1;
      chunk[corrupt.at - start] = (chunk[corrupt.at - start] ?? 0) ^ 0xff;
    }
    const cut = this.cuts.get(path);
    if (cut !== undefined) {
      this.cuts.delete(path);
      chunk = chunk.subarray(0, cut);
      entry.bytes += chunk.length;
      res.write(chunk, () => res.destroy());
      return;
    }
    if (this.stalls.has(path)) {
      this.stalls.delete(path);
      entry.bytes += Math.min(16, chunk.length);
      res.write(chunk.subarray(0, 16));
      return; // never ends: the client's stall timer must give up
    }
    entry.bytes += chunk.length;
    res.end(chunk);
  }
}
