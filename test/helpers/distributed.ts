import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DistributedTessera, type ServiceName, startDistributed } from "../../bin/distributed.js";
import { type Config, loadConfig } from "../../lib/config.js";
import { silentLogger } from "../../lib/logger.js";
import { startNatsServer, type NatsServerHandle } from "../nats/nats-server.js";
import { newApiKey, TEST_SERVING_ID, TINY_MODEL_DIR } from "./tessera.js";

/** What every models-config entry of the tiny test model shares, whatever its id and kind. */
export const TINY_MODEL_ENTRY = { release_date: "2026-11-22", model_dir: TINY_MODEL_DIR, serving_id: TEST_SERVING_ID };

/**
 * The processes of one distributed test file (`tessera serve <names>` wired in the test's
 * process): a real nats-server, a models config in a scratch folder and a bootstrap key.
 */
export interface DistributedHarness {
  /** TESSERA_BOOTSTRAP_KEY of every process. */
  readonly key: string;
  /** The settings every process shares, plus `env`. */
  config(env?: Record<string, string>): Config;
  /** Starts the named services in one process (closed by `close`). */
  start(services: readonly ServiceName[], env?: Record<string, string>): Promise<DistributedTessera>;
  /** Closes what `start` started (last first), the NATS server and the scratch folder. */
  close(): Promise<void>;
}

export async function startDistributedHarness(name: string, modelsConfig: unknown): Promise<DistributedHarness> {
  const nats: NatsServerHandle = await startNatsServer();
  const scratch = mkdtempSync(join(tmpdir(), `tessera-${name}-`));
  writeFileSync(join(scratch, "models.config.json"), JSON.stringify(modelsConfig));
  const key = newApiKey();
  const running: DistributedTessera[] = [];
  const config = (env: Record<string, string> = {}) =>
    loadConfig({
      env: {
        TESSERA_HOST: "127.0.0.1",
        TESSERA_PORT: "0",
        TESSERA_NATS_URL: nats.url,
        TESSERA_MODELS_CONFIG: join(scratch, "models.config.json"),
        TESSERA_BOOTSTRAP_KEY: key,
        TESSERA_ADMIN_TOKEN: "admin-token-for-this-test-0001",
        TESSERA_INTRA_OP_THREADS: "1",
        TESSERA_SHUTDOWN_TIMEOUT_MS: "1000",
        ...env,
      },
    });
  return {
    key,
    config,
    async start(services, env) {
      const app = await startDistributed({ config: config(env), logger: silentLogger(), services });
      running.push(app);
      return app;
    },
    async close() {
      for (const app of running.reverse()) await app.close();
      await nats.dispose();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
