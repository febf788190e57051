import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { SETTINGS } from "./config-settings.js";
import type { LogLevel } from "./logger.js";

export { SETTINGS };

export type ExecutionProvider = "cpu" | "cuda" | "webgpu";

/** Every setting of a Tessera process. Read once at start by `loadConfig`. */
export interface Config {
  host: string;
  port: number;
  /** A second port serving only /healthz, /readyz and /metrics; unset: none. */
  opsPort: number | undefined;
  dataDir: string;
  modelsConfig: string;
  bootstrapKey: string | undefined;
  defaultRequestsPerMinute: number;
  slots: number;
  queue: number;
  /** Most image_url parts per request, pixels and bytes per image (models with vision). */
  maxImages: number;
  maxImagePixels: number;
  maxImageBytes: number;
  /** Most tokens of model work one decision (Score request) may need. */
  maxDecisionWorkTokens: number;
  /** Most tokens of one forward of a decision: a longer question row is refused (400). */
  maxDecisionRowTokens: number;
  prefillChunkTokens: number;
  intraOpThreads: number;
  /** Run ONNX Runtime sessions on a worker thread. */
  ortWorker: boolean;
  /** The Python that runs `tessera convert` (empty: convert/.venv's, else python3). */
  convertPython: string;
  executionProviders: ExecutionProvider[];
  /** Where a GPU provider cannot start: `none` fails the load, `cpu` runs on the CPU (logged). */
  gpuFallback: "none" | "cpu";
  /** Unset: each model's own (config.json `decoding.threshold`), else 0.9. */
  unmaskThreshold: number | undefined;
  /** Unmasking policy spec; unset: each model's own (config.json `decoding.policy`), else `threshold`. */
  unmaskPolicy: string | undefined;
  /** Compiled grammars (JSON schemas, tool sets) kept per model. */
  grammarCacheSize: number;
  /** A grammar slower than this to compile is refused (400). */
  grammarCompileBudgetMs: number;
  /** Grammar worker threads per model (compiles in parallel, stopped at the budget). */
  grammarWorkers: number;
  /** Integers and numbers bounded where a schema gives no bounds. */
  grammarNumberBounds: boolean;
  /** The loop guard and length budgets of constrained values (0: off). */
  grammarLoopRepeats: number;
  grammarStringBudget: number;
  grammarItemBudget: number;
  /** The loop guard on auto-tools free text too. */
  grammarFreeTextGuard: boolean;
  grammarReplyBudget: boolean;
  logLevel: LogLevel;
  natsUrl: string | undefined;
  workerId: string;
  shutdownTimeoutMs: number;
  /** Hardening of the HTTP port (gateway/server.ts): timeouts, deadline, connection and size caps. */
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  requestDeadlineMs: number;
  streamStallTimeoutMs: number;
  maxConnections: number;
  maxConnectionsPerAddress: number;
  firstByteTimeoutMs: number;
  /** Connections still sending headers or a body at once; past it the oldest is closed. */
  maxReceivingConnections: number;
  /** Failed authentications per minute per client address before 429 (0: no throttle). */
  authFailuresPerMinute: number;
  maxHeaderBytes: number;
  maxHeaders: number;
  maxUrlBytes: number;
  /** Serve the playground page at `/` (web/, built by `npm run build`). */
  playground: boolean;
  /** Origins browsers may call the API from (CORS); `*` for any; empty: none. */
  corsOrigins: string[];
  /** Distributed mode: Connect base URLs of the accounting replicas, tried in turn. */
  accountingUrls: string[];
  registryUrls: string[];
  decisionUrls: string[];
  /** The Connect base URL an inference worker announces (default: http://TESSERA_HOST:port). */
  advertiseUrl: string | undefined;
  /** Bearer credential of accounting's admin RPCs in distributed mode. */
  adminToken: string | undefined;
  /** Optional bearer credential of accounting's internal RPCs (Authenticate, Admit, Settle). */
  internalToken: string | undefined;
  /** How long one JetStream request (KV read or write, publish) may take before it fails. */
  natsTimeoutMs: number;
  /** Replicas of the JetStream KV buckets and the usage stream. */
  natsReplicas: number;
  /** How long a usage event may stay unacknowledged before JetStream redelivers it. */
  usageAckWaitMs: number;
  /** How often accounting settles and releases the requests of gateways whose heartbeat lapsed. */
  gatewaySweepIntervalMs: number;
}

/** The file named by TESSERA_CONFIG: a JSON object keyed by the same names as the environment. */
export const CONFIG_FILE_ENV = "TESSERA_CONFIG";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths given in the environment; the process's working directory. */
  cwd?: string;
}

/**
 * Reads every setting from the environment, then from the optional JSON file named by
 * TESSERA_CONFIG (relative paths in it are relative to the file), then the defaults.
 * Throws a ConfigError listing every problem at once.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const problems: string[] = [];
  let file: Record<string, unknown> = {};
  let fileDir = cwd;

  const filePath = env[CONFIG_FILE_ENV]?.trim();
  if (filePath) {
    const abs = resolve(cwd, filePath);
    fileDir = dirname(abs);
    try {
      const parsed: unknown = JSON.parse(readFileSync(abs, "utf8"));
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        problems.push(`${CONFIG_FILE_ENV} (${abs}): must hold a JSON object`);
      } else {
        file = parsed as Record<string, unknown>;
        const known = new Set(SETTINGS.map((s) => s.env));
        for (const name of Object.keys(file)) {
          if (!known.has(name)) problems.push(`${CONFIG_FILE_ENV} (${abs}): unknown setting "${name}"`);
        }
      }
    } catch (err) {
      problems.push(`${CONFIG_FILE_ENV} (${abs}): ${(err as Error).message}`);
    }
  }

  const config: Partial<Record<keyof Config, unknown>> = {};
  for (const setting of SETTINGS) {
    let raw: string | undefined;
    let base = cwd;
    let source = "environment";
    if (env[setting.env] !== undefined) {
      raw = env[setting.env];
    } else if (Object.hasOwn(file, setting.env)) {
      const value = file[setting.env];
      raw = Array.isArray(value) ? value.join(",") : value === null ? "" : String(value);
      base = fileDir;
      source = CONFIG_FILE_ENV;
    } else {
      raw = setting.fallback;
      source = "default";
    }
    if (raw === undefined) {
      config[setting.key] = undefined;
      continue;
    }
    try {
      config[setting.key] = setting.parse(raw, base);
    } catch (err) {
      problems.push(`${setting.env} (${source}): ${(err as Error).message}`);
    }
  }
  if (
    typeof config.headersTimeoutMs === "number" &&
    typeof config.bodyTimeoutMs === "number" &&
    config.bodyTimeoutMs < config.headersTimeoutMs
  ) {
    problems.push(
      `TESSERA_BODY_TIMEOUT_MS (${config.bodyTimeoutMs}) must be at least TESSERA_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs})`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config as Config;
}

/** The settings as `--help` prints them: name, default, meaning. */
export function settingsHelp(): string {
  const width = Math.max(...SETTINGS.map((s) => s.env.length), CONFIG_FILE_ENV.length);
  const lines = [
    `  ${CONFIG_FILE_ENV.padEnd(width)}  JSON file with any of the settings below, keyed by the same names (the environment wins).`,
    ...SETTINGS.map(
      (s) => `  ${s.env.padEnd(width)}  ${s.help}${s.fallback === undefined || s.fallback === "" ? "" : ` [default: ${s.fallback}]`}`,
    ),
  ];
  return lines.join("\n");
}
