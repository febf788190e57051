// Secrets: a full session (first-start key, keys made by the admin RPCs and by the keys CLI,
// chat and streamed chat, decisions, the listing, Connect calls, errors with wrong and revoked
// keys), then every log line, /metrics and every byte of the data directory are searched
// for every secret. Keys appear only by id; at rest only hashes; the first-start key is
// printed once; accounting's admin RPCs cannot be reached on the public port.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnTesseraServe } from "../helpers/serve-process.js";
import { REPO_ROOT, startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { rawExchange } from "./http-client.js";

let tessera: TestTessera;
/** Every secret the session handles, and the wrong keys it sends (one typo from a real one). */
const secrets: string[] = [];
const keyIds: string[] = [];

beforeAll(async () => {
  // No TESSERA_BOOTSTRAP_KEY: the server makes the first key itself and prints it.
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_BOOTSTRAP_KEY: "", TESSERA_LOG_LEVEL: "trace" } });
});
afterAll(async () => {
  await tessera?.close();
});

function cli(args: string[]) {
  const result = spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", "keys", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, TESSERA_DATA_DIR: tessera.dataDir, TESSERA_LOG_LEVEL: "trace" },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** The forms a secret could be stored or logged in: as sent, its random part, its raw bytes. */
function formsOf(secret: string): Buffer[] {
  const random = secret.slice("tsr_".length);
  return [Buffer.from(secret), Buffer.from(random), Buffer.from(random, "base64url")].filter((b) => b.length >= 16);
}

async function post(path: string, key: string, body: unknown) {
  const res = await tessera.fetch(path, {
    key,
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, text: await res.text() };
}

describe("secrets", () => {
  it("runs a full session with every kind of key and error", async () => {
    // The first-start key, printed once.
    const first = tessera.createdKey;
    expect(first).toMatch(/^tsr_[A-Za-z0-9_-]{40,}$/);
    secrets.push(first!);
    expect(tessera.printed.join("").split(first!).length - 1).toBe(1);

    // Keys from the admin RPCs (in-process only) and from the CLI, next to the running server.
    const admin = await tessera.createKey({ rpm: 1000 });
    secrets.push(admin.apiKey);
    keyIds.push(admin.keyId);
    const created = cli(["create", "--name", "cli-key"]);
    expect(created.status).toBe(0);
    const cliKey = created.stdout.trim().split("\n").at(-1)!.trim();
    expect(cliKey).toMatch(/^tsr_/);
    secrets.push(cliKey);
    // The CLI shows the key once, on stdout; nothing else it writes carries it.
    expect(created.stdout.split(cliKey).length - 1).toBe(1);
    expect(created.stderr).not.toContain(cliKey);
    const listed = cli(["list"]);
    expect(listed.status).toBe(0);
    for (const secret of secrets) expect(listed.stdout + listed.stderr).not.toContain(secret);

    // Traffic with every key.
    for (const key of secrets) {
      expect((await tessera.fetch("/v1/models", { key })).status).toBe(200);
      const chat = await post("/v1/chat/completions", key, {
        model: "textmodel-26b",
        max_tokens: 2,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(chat.status).toBe(200);
      const stream = await post("/v1/chat/completions", key, {
        model: "textmodel-26b",
        max_tokens: 2,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(stream.text).toMatch(/data: \[DONE\]/);
      const decision = await post("/v1/systemone", key, { model: "decisionmodel-latest", state: "s", questions: { q: { type: "noul" } } });
      expect(decision.status).toBe(200);
      // Errors after authentication, with the key in hand.
      expect((await post("/v1/systemone", key, { model: "nope" })).status).toBe(422);
      expect((await post("/v1/chat/completions", key, { model: "nope", messages: [{ role: "user", content: "hi" }] })).status).toBe(404);
      // A Connect call on the public port.
      const connect = await tessera.fetch("/tessera.registry.v1.RegistryService/ListModels", {
        key,
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" },
      });
      expect(connect.status).toBe(200);
    }

    // Wrong keys: one character off, revoked, in the wrong header, in the query string.
    const typo = `${secrets[1]!.slice(0, -1)}${secrets[1]!.endsWith("A") ? "B" : "A"}`;
    secrets.push(typo);
    expect((await tessera.fetch("/v1/models", { key: typo })).status).toBe(401);
    await tessera.clients.accounting.revokeKey({ keyId: admin.keyId });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect([401, 403]).toContain((await post("/v1/systemone", admin.apiKey, { model: "x" })).status);
    expect((await tessera.fetch("/v1/models", { key: null, headers: { "x-api-key": secrets[0]! } })).status).toBe(403);
    expect((await tessera.fetch(`/v1/models?api_key=${secrets[0]}`, { key: null })).status).toBe(403);
    expect((await tessera.fetch(`/v2/${secrets[0]}`, { key: secrets[0] })).status).toBe(404);
    expect((await tessera.fetch("/v1/models", { key: null, headers: { authorization: `Basic ${secrets[0]}` } })).status).toBe(403);
    const connectTypo = await tessera.fetch("/tessera.registry.v1.RegistryService/ListModels", {
      key: typo,
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(connectTypo.status).toBe(401);

    expect(tessera.logs.length).toBeGreaterThan(30);
  });

  it("never writes a secret to the logs: requests are logged with key ids", async () => {
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const secret of secrets) {
      for (const form of formsOf(secret)) {
        const text = form.toString("utf8");
        const leaking = tessera.logs.filter((line) => line.includes(text)).map((line) => line.replaceAll(text, "<SECRET>"));
        expect(leaking, `log lines hold ${secret.slice(0, 8)}…`).toEqual([]);
      }
    }
    const lines = tessera.logs.map((line) => JSON.parse(line) as { msg: string; keyId?: string; status?: number });
    const requests = lines.filter((l) => l.msg === "request");
    expect(requests.length).toBeGreaterThan(20);
    // Authenticated requests name their key by id.
    expect(requests.filter((l) => l.status === 200).every((l) => typeof l.keyId === "string" && l.keyId.startsWith("key_"))).toBe(true);
    expect(requests.some((l) => l.keyId === keyIds[0])).toBe(true);
  });

  it("never exposes a secret in /metrics", async () => {
    const metrics = await (await tessera.fetch("/metrics", { key: null })).text();
    expect(metrics).toMatch(/tessera_http_requests_total/);
    for (const secret of secrets) for (const form of formsOf(secret)) expect(metrics.includes(form.toString("utf8"))).toBe(false);
  });

  it("stores keys only as hashes: no byte of the data directory holds a secret", () => {
    const files = filesUnder(tessera.dataDir);
    expect(files.length).toBeGreaterThan(0);
    let scanned = 0;
    let idsFound = 0;
    for (const file of files) {
      const bytes = readFileSync(file);
      scanned += bytes.length;
      for (const secret of secrets) {
        for (const form of formsOf(secret)) expect(bytes.indexOf(form), `${file} holds ${secret.slice(0, 8)}…`).toBe(-1);
      }
      if (bytes.indexOf(Buffer.from(keyIds[0]!)) >= 0) idsFound++;
    }
    // The scan did read the store: the key's id is in it.
    expect(scanned).toBeGreaterThan(0);
    expect(idsFound).toBeGreaterThan(0);
  });

  it("prints no key on a later start, and the first key still works", async () => {
    // A later start is another process on the same data directory (LMDB allows one open per process).
    const again = await spawnTesseraServe({
      TESSERA_DATA_DIR: tessera.dataDir,
      TESSERA_MODELS_CONFIG: join(REPO_ROOT, "models.config.json"),
      TESSERA_BOOTSTRAP_KEY: "",
    });
    try {
      expect(again.output.filter((line) => !line.startsWith("{"))).toEqual([]);
      for (const secret of secrets) expect(again.output.join("\n")).not.toContain(secret);
      const res = await fetch(`${again.url}/v1/models`, { headers: { authorization: `Bearer ${secrets[0]}` } });
      expect(res.status).toBe(200);
    } finally {
      expect(await again.stop()).toBe(0);
    }
  });
});

describe("accounting's admin RPCs on the public port", () => {
  const METHODS = [
    "CreateKey",
    "RevokeKey",
    "ListKeys",
    "SetAccountStatus",
    "SetQuota",
    "GetUsage",
    "EnsureKey",
    "Authenticate",
    "Admit",
    "Settle",
  ];
  const SERVICE = "tessera.accounting.v1.AccountingService";

  it("are not served, whatever the protocol, path spelling or key", async () => {
    const before = (await tessera.clients.accounting.listKeys({})).keys.length;
    const key = secrets[0]!;
    const paths = METHODS.flatMap((m) => [
      `/${SERVICE}/${m}`,
      `//${SERVICE}/${m}`,
      `/${SERVICE}/${m}/`,
      `/${SERVICE}%2F${m}`,
      `/${SERVICE.toUpperCase()}/${m}`,
      `/${SERVICE}/${m}?x=1`,
    ]);
    const contentTypes = [
      "application/json",
      "application/proto",
      "application/grpc-web+proto",
      "application/grpc-web+json",
      "application/connect+json",
    ];
    for (const path of paths) {
      for (const type of contentTypes) {
        const res = await tessera.fetch(path, {
          key,
          method: "POST",
          body: '{"name":"x"}',
          headers: { "content-type": type, "connect-protocol-version": "1" },
        });
        expect(res.status, `${path} ${type}`).toBe(404);
        await res.arrayBuffer();
      }
    }
    // gRPC proper needs HTTP/2; over HTTP/1.1 it is the same 404.
    const grpc = await rawExchange(
      tessera.port,
      Buffer.from(
        `POST /${SERVICE}/CreateKey HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/grpc\r\nte: trailers\r\ncontent-length: 5\r\nconnection: close\r\n\r\n\0\0\0\0\0`,
      ),
    );
    expect(grpc.status).toBe(404);
    expect((await tessera.clients.accounting.listKeys({})).keys.length).toBe(before);
  });
});
