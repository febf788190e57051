import { integer, path } from "../config-parsers.js";
import { LOG_LEVELS, type LogLevel } from "../logger.js";
import { section } from "./setting.js";

// The process, its files and the hub: where it listens, logs, stores and converts.

export const server = section("Server", "The process: the address and ports it listens on, its log, its shutdown.", {
  host: {
    env: "TESSERA_HOST",
    fallback: "127.0.0.1",
    help: "Address the HTTP server listens on (0.0.0.0 for every interface).",
    parse: (raw) => {
      if (raw.trim() === "") throw new Error("must not be empty");
      return raw.trim();
    },
  },
  port: { env: "TESSERA_PORT", fallback: "8080", help: "HTTP port (0 picks a free one).", parse: integer(0, 65535) },
  opsPort: {
    env: "TESSERA_OPS_PORT",
    fallback: undefined,
    help: "A second HTTP port, on the same host, serving only /healthz, /readyz and /metrics with connection caps of its own, so probes never queue behind clients; when set, /metrics is served there only (the public port answers it 404) (0 picks a free one; unset: none, they are on the public port only).",
    parse: (raw) => (raw.trim() === "" ? undefined : integer(0, 65535)(raw)),
  },
  logLevel: {
    env: "TESSERA_LOG_LEVEL",
    fallback: "info",
    help: `Log level: ${LOG_LEVELS.join(", ")}.`,
    parse: (raw) => {
      const level = raw.trim().toLowerCase();
      if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`must be one of ${LOG_LEVELS.join(", ")}`);
      return level as LogLevel;
    },
  },
  shutdownTimeoutMs: {
    env: "TESSERA_SHUTDOWN_TIMEOUT_MS",
    fallback: "10000",
    help: "On SIGINT/SIGTERM, how long in-flight requests may finish before they are cancelled.",
    parse: integer(0, 600_000),
  },
});

export const storage = section("Storage", "Where the store and the models config live.", {
  dataDir: {
    env: "TESSERA_DATA_DIR",
    fallback: "./data",
    help: "Directory of the embedded store (keys, accounts, quotas, usage ledger) and of the models `tessera pull` converts or links (models/, docs/serving-models.md).",
    parse: path,
  },
  modelsConfig: {
    env: "TESSERA_MODELS_CONFIG",
    fallback: "./models.config.json",
    help: "Models config: catalog of model ids, aliases, release dates and model directories.",
    parse: path,
  },
});

export const hub = section("Hub", "Pulling and converting models (`tessera pull`, `tessera convert`).", {
  convertPython: {
    env: "TESSERA_CONVERT_PYTHON",
    fallback: "",
    help: "Python for `tessera convert` (needs convert/requirements.txt); empty: convert/.venv/bin/python if present, else python3.",
    parse: (raw) => raw.trim(),
  },
});
