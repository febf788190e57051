import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import type { AccountStatus } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { startEmbedded, type EmbeddedTessera } from "../../bin/embedded.js";
import { loadConfig } from "../../lib/config.js";
import { startHeartbeats, type HeartbeatPublisher } from "../../lib/heartbeats/publisher.js";
import { createLogger } from "../../lib/logger.js";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");
export const TINY_MODEL_DIR = join(REPO_ROOT, "test/fixtures/tiny-model");
export const BUNDLED_MODEL_DIR = join(REPO_ROOT, "models/tessera-bd-small");

/** The serving id of the models config's one model directory, `tessera-test-model`. */
export const TEST_SERVING_ID = "tessera-test-model";

export interface TestTesseraOptions {
  /**
   * `tiny`: serve test/fixtures/tiny-model through the real inference pool (`bundled`:
   * models/tessera-bd-small, the same way). `none`: the
   * model directory does not exist, so no pool is loaded (tests announce workers themselves).
   */
  models?: "none" | "tiny" | "bundled";
  /** Serve this model directory instead of `models` (e.g. a converted DiffusionGemma). */
  modelDir?: string;
  /** Extra TESSERA_* settings. */
  env?: Record<string, string>;
  /** Reuse a data directory (restart tests); a fresh temporary one otherwise. */
  dataDir?: string;
  /** How the services call each other (default: the in-process transport). */
  internalTransport?: "in-process" | "router";
}

export interface TestKey {
  apiKey: string;
  keyId: string;
  accountId: string;
}

export interface TestTessera extends EmbeddedTessera {
  /** TESSERA_BOOTSTRAP_KEY of this server: active, default limits. */
  key: string;
  dataDir: string;
  /** Every log line written so far (JSON text). */
  logs: string[];
  /** What the launcher printed to its `out` (the first-start key). */
  printed: string[];
  /** Issues another key through the accounting admin RPCs (never reachable over HTTP). */
  createKey(options?: { rpm?: number; textQuota?: number; decisionQuota?: number }): Promise<TestKey>;
  setAccountStatus(accountId: string, status: AccountStatus): Promise<void>;
  /** Announces a live worker serving the test model (heartbeats until close), for `models: "none"`. */
  announceWorker(options?: { id?: string; address?: string; slotsTotal?: number; slotsFree?: number }): HeartbeatPublisher;
  fetch(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
}

export function newApiKey(): string {
  return `tsr_${randomBytes(32).toString("base64url")}`;
}

/** Writes a models config serving modelDir as the text model and the decision family; returns its path. */
export function writeModelsConfig(dir: string, modelDir: string): string {
  const file = join(dir, "models.config.json");
  const common = { release_date: "2026-11-22", model_dir: modelDir, serving_id: TEST_SERVING_ID };
  writeFileSync(
    file,
    JSON.stringify({
      models: [
        { id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "the test text model", ...common },
        {
          id: "decisionmodel-0.1",
          kind: "decision",
          family: "decisionmodel",
          version: "0.1",
          description: "the test decision model",
          ...common,
        },
      ],
      latest: [{ id: "decisionmodel-latest", family: "decisionmodel", aliases: ["jev-latest"] }],
    }),
  );
  return file;
}

/** An embedded Tessera on 127.0.0.1 and a free port, with its own data directory and captured logs. */
export async function startTestTessera(options: TestTesseraOptions = {}): Promise<TestTessera> {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-test-"));
  const dataDir = options.dataDir ?? join(scratch, "data");
  const modelDir =
    options.modelDir ??
    (options.models === "tiny" ? TINY_MODEL_DIR : options.models === "bundled" ? BUNDLED_MODEL_DIR : join(scratch, "no-model-here"));
  const key = newApiKey();
  const config = loadConfig({
    env: {
      TESSERA_HOST: "127.0.0.1",
      TESSERA_PORT: "0",
      TESSERA_DATA_DIR: dataDir,
      TESSERA_MODELS_CONFIG: writeModelsConfig(scratch, modelDir),
      TESSERA_BOOTSTRAP_KEY: key,
      TESSERA_LOG_LEVEL: "debug",
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_SHUTDOWN_TIMEOUT_MS: "2000",
      TESSERA_WORKER_ID: "embedded-test-worker",
      ...options.env,
    },
  });
  const logs: string[] = [];
  const printed: string[] = [];
  const logger = createLogger({
    level: config.server.logLevel,
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line !== "") logs.push(line);
        done();
      },
    }),
  });
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      printed.push(chunk.toString("utf8"));
      done();
    },
  });
  const app = await startEmbedded({
    config,
    logger,
    out,
    ...(options.internalTransport !== undefined && { internalTransport: options.internalTransport }),
  });
  const publishers: HeartbeatPublisher[] = [];

  return {
    ...app,
    key,
    dataDir,
    logs,
    printed,
    async createKey({ rpm, textQuota, decisionQuota } = {}) {
      const created = await app.clients.accounting.createKey({
        name: "test",
        limits: {
          ...(rpm !== undefined && { requestsPerMinute: rpm }),
          ...(textQuota !== undefined && { textQuotaTokens: BigInt(textQuota) }),
          ...(decisionQuota !== undefined && { decisionQuotaTokens: BigInt(decisionQuota) }),
        },
      });
      return { apiKey: created.apiKey, keyId: created.key!.keyId, accountId: created.key!.accountId };
    },
    async setAccountStatus(accountId, status) {
      await app.clients.accounting.setAccountStatus({ accountId, status });
    },
    announceWorker({ id = "test-worker", address = "", slotsTotal = 4, slotsFree = 4 } = {}) {
      const publisher = startHeartbeats(app.workers, () => ({ id, address, models: [TEST_SERVING_ID], slotsTotal, slotsFree }));
      publishers.push(publisher);
      return publisher;
    },
    fetch(path, init = {}) {
      const { key: useKey = key, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (useKey !== null && !headers.has("authorization")) headers.set("authorization", `Bearer ${useKey}`);
      return fetch(`${app.url}${path}`, { ...rest, headers });
    },
    async close() {
      for (const publisher of publishers) publisher.stop();
      await app.close();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
