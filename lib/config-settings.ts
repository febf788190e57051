import { availableParallelism, hostname } from "node:os";
import { integer, path, optional, baseUrl, urlList, parseCorsOrigins, token, onOff } from "./config-parsers.js";
import type { Config, ExecutionProvider } from "./config.js";
import { LOG_LEVELS, type LogLevel } from "./logger.js";

// Every setting: its variable, default, help line and parser. `loadConfig` (config.ts) reads them.

export interface Setting<K extends keyof Config> {
  env: string;
  key: K;
  /** The default as the help shows it; undefined means unset. */
  fallback: string | undefined;
  /** The default as docs/configuration.md shows it, where `fallback` depends on the machine. */
  documentedDefault?: string;
  help: string;
  /** Turns the raw text into the value or throws an Error whose message says what is wrong. */
  parse: (raw: string, baseDir: string) => Config[K];
}

export type AnySetting = { [K in keyof Config]: Setting<K> }[keyof Config];

export const SETTINGS: readonly AnySetting[] = [
  {
    env: "TESSERA_HOST",
    key: "host",
    fallback: "127.0.0.1",
    help: "Address the HTTP server listens on (0.0.0.0 for every interface).",
    parse: (raw) => {
      if (raw.trim() === "") throw new Error("must not be empty");
      return raw.trim();
    },
  },
  { env: "TESSERA_PORT", key: "port", fallback: "8080", help: "HTTP port (0 picks a free one).", parse: integer(0, 65535) },
  {
    env: "TESSERA_OPS_PORT",
    key: "opsPort",
    fallback: undefined,
    help: "A second HTTP port, on the same host, serving only /healthz, /readyz and /metrics with connection caps of its own, so probes never queue behind clients; when set, /metrics is served there only (the public port answers it 404) (0 picks a free one; unset: none, they are on the public port only).",
    parse: (raw) => (raw.trim() === "" ? undefined : integer(0, 65535)(raw)),
  },
  {
    env: "TESSERA_DATA_DIR",
    key: "dataDir",
    fallback: "./data",
    help: "Directory of the embedded store (keys, accounts, quotas, usage ledger) and of the models `tessera pull` converts or links (models/, docs/serving-models.md).",
    parse: path,
  },
  {
    env: "TESSERA_MODELS_CONFIG",
    key: "modelsConfig",
    fallback: "./models.config.json",
    help: "Models config: catalog of model ids, aliases, release dates and model directories.",
    parse: path,
  },
  {
    env: "TESSERA_BOOTSTRAP_KEY",
    key: "bootstrapKey",
    fallback: undefined,
    help: "An API key (tsr_...) that must exist and be active; no key is generated when it is set.",
    parse: (raw) => {
      const key = raw.trim();
      if (key === "") return undefined;
      if (!/^tsr_[A-Za-z0-9_-]{16,}$/.test(key)) throw new Error("must look like tsr_ followed by at least 16 letters, digits, - or _");
      return key;
    },
  },
  {
    env: "TESSERA_DEFAULT_RPM",
    key: "defaultRequestsPerMinute",
    fallback: "60",
    help: "Requests per minute allowed per key unless the key has its own limit.",
    parse: integer(1, 1_000_000_000),
  },
  {
    env: "TESSERA_SLOTS",
    key: "slots",
    fallback: "4",
    help: "Generation slots per inference worker (sequences denoised together).",
    parse: integer(1, 1024),
  },
  {
    env: "TESSERA_QUEUE",
    key: "queue",
    fallback: "16",
    help: "Requests that may wait for a slot; beyond that the answer is 529 overloaded_error.",
    parse: integer(0, 100_000),
  },
  {
    env: "TESSERA_MAX_IMAGES",
    key: "maxImages",
    fallback: "8",
    help: "Most image_url parts in one request to a model with vision; more is refused with 400.",
    parse: integer(0, 1024),
  },
  {
    env: "TESSERA_MAX_IMAGE_PIXELS",
    key: "maxImagePixels",
    fallback: "33554432",
    help: "Most pixels (width x height) of one image, checked before it is decoded; larger is refused with 400.",
    parse: integer(1, 1_000_000_000),
  },
  {
    env: "TESSERA_MAX_IMAGE_BYTES",
    key: "maxImageBytes",
    fallback: "10485760",
    help: "Most bytes of one image (decoded from its base64 data: URL); larger is refused with 400.",
    parse: integer(1, 1_000_000_000),
  },
  {
    env: "TESSERA_MAX_DECISION_WORK_TOKENS",
    key: "maxDecisionWorkTokens",
    fallback: "8192",
    help:
      "Most tokens of model work one decision may need (the state once, plus each question's row: its state tail, question and answer slot); " +
      "more is refused with 400 naming this limit before the model runs.",
    parse: integer(1, 100_000_000),
  },
  {
    env: "TESSERA_MAX_DECISION_ROW_TOKENS",
    key: "maxDecisionRowTokens",
    fallback: "1024",
    help:
      "Most tokens of one model forward of a decision: the state, and a question whose row (its state tail, question and options, answer slot) " +
      "is longer, are prefilled in chunks of at most this many tokens and rows are batched within it, so that a decision holds the model for " +
      "one short forward at a time. A question is refused only when it does not fit the model's context.",
    parse: integer(64, 100_000),
  },
  {
    env: "TESSERA_PREFILL_CHUNK_TOKENS",
    key: "prefillChunkTokens",
    fallback: "0",
    help:
      "Most prompt tokens per prefill forward (whole 64-token blocks) of a chat prompt or a decision's state; 0: 512 on the CPU, " +
      "where smaller chunks skip the attention a long forward computes and masks away (bench/prefill.ts), 2048 on a GPU.",
    parse: integer(0, 100_000),
  },
  {
    env: "TESSERA_CONVERT_PYTHON",
    key: "convertPython",
    fallback: "",
    help: "Python for `tessera convert` (needs convert/requirements.txt); empty: convert/.venv/bin/python if present, else python3.",
    parse: (raw) => raw.trim(),
  },
  {
    env: "TESSERA_ORT_WORKER",
    key: "ortWorker",
    fallback: "on",
    help: "Run ONNX Runtime sessions on a worker thread (on), so forwards never block the event loop; off runs them on the main thread.",
    parse: onOff,
  },
  {
    env: "TESSERA_INTRA_OP_THREADS",
    key: "intraOpThreads",
    fallback: String(availableParallelism()),
    documentedDefault: "CPU count",
    help: "ONNX Runtime intra-op threads per session (default: the CPU count).",
    parse: integer(1, 1024),
  },
  {
    env: "TESSERA_EXECUTION_PROVIDERS",
    key: "executionProviders",
    fallback: "cpu",
    help: "ONNX Runtime execution providers in order of preference: cpu; webgpu (any GPU with a Vulkan driver; the key/values stay on the device); or cuda,cpu where the CUDA files are installed. A models config entry's execution_providers wins.",
    parse: (raw) => {
      const names = raw
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s !== "");
      if (names.length === 0) throw new Error("must name at least one provider");
      for (const name of names) {
        if (name !== "cpu" && name !== "cuda" && name !== "webgpu") throw new Error(`unknown provider "${name}" (cpu, webgpu or cuda)`);
      }
      if (new Set(names).size !== names.length) throw new Error("names a provider twice");
      return names as ExecutionProvider[];
    },
  },
  {
    env: "TESSERA_GPU_FALLBACK",
    key: "gpuFallback",
    fallback: "none",
    help: "Where a GPU provider (webgpu, cuda) cannot start (no adapter, no driver, libraries missing): none fails the model's load naming the cause and the fix; cpu runs it on the CPU and logs why.",
    parse: (raw) => {
      const value = raw.trim().toLowerCase();
      if (value !== "none" && value !== "cpu") throw new Error(`must be none or cpu, got "${raw}"`);
      return value;
    },
  },
  {
    env: "TESSERA_UNMASK_THRESHOLD",
    key: "unmaskThreshold",
    fallback: undefined,
    help: "Confidence of the threshold rule where the unmasking policy names none (0 < t <= 1); unset: the model's config.json decoding.threshold, else 0.9.",
    parse: (raw) => {
      const t = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(t) || t <= 0 || t > 1) throw new Error(`must be a number in (0, 1], got "${raw}"`);
      return t;
    },
  },
  {
    env: "TESSERA_UNMASK_POLICY",
    key: "unmaskPolicy",
    fallback: undefined,
    help: "Unmasking policy of every model (e.g. threshold(0.9), fill(0.7)+threshold(0.9); docs/decoding.md); unset: each model's config.json decoding.policy, else threshold. A models config entry's unmask_policy wins over both.",
    parse: (raw) => {
      const spec = raw.trim();
      if (!/^[a-z-]+(\([^()]*\))?(\s*\+\s*[a-z-]+(\([^()]*\))?)*$/.test(spec)) {
        throw new Error(`must be components joined by +, each name or name(knobs), got "${raw}"`);
      }
      return spec;
    },
  },
  {
    env: "TESSERA_GRAMMAR_CACHE",
    key: "grammarCacheSize",
    fallback: "64",
    help: "Compiled grammars (JSON schemas, tool sets) kept per grammar thread of a model; the least recently used are dropped.",
    parse: integer(1, 100_000),
  },
  {
    env: "TESSERA_GRAMMAR_COMPILE_BUDGET_MS",
    key: "grammarCompileBudgetMs",
    fallback: "5000",
    help: "A JSON schema or tool set whose grammar takes longer than this to compile is refused (400) and remembered as refused.",
    parse: integer(1, 600_000),
  },
  {
    env: "TESSERA_GRAMMAR_WORKERS",
    key: "grammarWorkers",
    fallback: "6",
    help: "Grammar compile threads per model: compiles run in parallel on threads that serve no reply; a grammar's replies run on the thread that compiled it.",
    parse: integer(1, 64),
  },
  {
    env: "TESSERA_GRAMMAR_NUMBER_BOUNDS",
    key: "grammarNumberBounds",
    fallback: "on",
    help: "Bound integers to ±(2^53 − 1) and numbers to 16 integer, 15 fraction and 2 exponent digits where a schema gives no bounds (docs/constrained-decoding.md).",
    parse: onOff,
  },
  {
    env: "TESSERA_GRAMMAR_LOOP_REPEATS",
    key: "grammarLoopRepeats",
    fallback: "4",
    help: "Loop guard of constrained values: a unit of 1–8 tokens repeated this many times (over 8 tokens at least) has its next repeat masked; 0: off.",
    parse: integer(0, 1000),
  },
  {
    env: "TESSERA_GRAMMAR_STRING_BUDGET",
    key: "grammarStringBudget",
    fallback: "256",
    help: "Tokens of a JSON string after which closing it is progressively favoured; 0: no budget.",
    parse: integer(0, 1_000_000),
  },
  {
    env: "TESSERA_GRAMMAR_ITEM_BUDGET",
    key: "grammarItemBudget",
    fallback: "64",
    help: "Items of a JSON array or object after which closing it is progressively favoured; 0: no budget.",
    parse: integer(0, 1_000_000),
  },
  {
    env: "TESSERA_GRAMMAR_REPLY_BUDGET",
    key: "grammarReplyBudget",
    fallback: "on",
    help: "Close every open JSON value of a constrained reply before its max_tokens (favoured over the last quarter, forced within the reserve); off: none.",
    parse: onOff,
  },
  {
    env: "TESSERA_GRAMMAR_FREE_TEXT_GUARD",
    key: "grammarFreeTextGuard",
    fallback: "off",
    help: "Apply the loop guard to the free text of an auto-tools reply too (it changes answers, so off by default).",
    parse: onOff,
  },
  {
    env: "TESSERA_LOG_LEVEL",
    key: "logLevel",
    fallback: "info",
    help: `Log level: ${LOG_LEVELS.join(", ")}.`,
    parse: (raw) => {
      const level = raw.trim().toLowerCase();
      if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`must be one of ${LOG_LEVELS.join(", ")}`);
      return level as LogLevel;
    },
  },
  {
    env: "TESSERA_NATS_URL",
    key: "natsUrl",
    fallback: undefined,
    help: "NATS server for distributed mode (nats://host:4222); unset runs the embedded adapters.",
    parse: (raw) => {
      const url = optional(raw);
      if (url !== undefined && !/^(nats|tls|ws|wss):\/\/./.test(url)) throw new Error(`must be a nats:// URL, got "${raw}"`);
      return url;
    },
  },
  {
    env: "TESSERA_WORKER_ID",
    key: "workerId",
    fallback: `${hostname()}-${process.pid}`,
    documentedDefault: "host-pid",
    help: "Id this process's inference worker announces in its heartbeats (default: host-pid).",
    parse: (raw) => {
      if (!/^[A-Za-z0-9._:-]{1,128}$/.test(raw)) throw new Error("must be 1-128 letters, digits, . _ : -");
      return raw;
    },
  },
  {
    env: "TESSERA_SHUTDOWN_TIMEOUT_MS",
    key: "shutdownTimeoutMs",
    fallback: "10000",
    help: "On SIGINT/SIGTERM, how long in-flight requests may finish before they are cancelled.",
    parse: integer(0, 600_000),
  },
  {
    env: "TESSERA_HEADERS_TIMEOUT_MS",
    key: "headersTimeoutMs",
    fallback: "10000",
    help: "Time a client has to send a request's headers; slower ones get 408 and are cut off (slowloris).",
    parse: integer(100, 600_000),
  },
  {
    env: "TESSERA_BODY_TIMEOUT_MS",
    key: "bodyTimeoutMs",
    fallback: "60000",
    help: "Time a client has to send a whole request, body included (at least the headers timeout); slower ones get 408.",
    parse: integer(100, 3_600_000),
  },
  {
    env: "TESSERA_REQUEST_DEADLINE_MS",
    key: "requestDeadlineMs",
    fallback: "600000",
    help: "A request whose answer has not started after this long gets 504 and its work is cancelled (0: no deadline).",
    parse: integer(0, 86_400_000),
  },
  {
    env: "TESSERA_STREAM_STALL_TIMEOUT_MS",
    key: "streamStallTimeoutMs",
    fallback: "30000",
    help: "A stream whose client reads nothing for this long is dropped and its generation slot freed.",
    parse: integer(100, 3_600_000),
  },
  {
    env: "TESSERA_MAX_CONNECTIONS",
    key: "maxConnections",
    fallback: "1024",
    help: "Connections open at once on the HTTP port; at the cap the oldest idle connection is closed for a new one (a new one is refused only when all are busy).",
    parse: integer(1, 1_000_000),
  },
  {
    env: "TESSERA_MAX_CONNECTIONS_PER_ADDRESS",
    key: "maxConnectionsPerAddress",
    fallback: "256",
    help: "Connections open at once from one client address; at the cap that address's oldest idle connection is closed for a new one.",
    parse: integer(1, 1_000_000),
  },
  {
    env: "TESSERA_FIRST_BYTE_TIMEOUT_MS",
    key: "firstByteTimeoutMs",
    fallback: "5000",
    help: "A connection that sends no byte this long after opening is closed (0: never; the headers timeout still applies).",
    parse: integer(0, 3_600_000),
  },
  {
    env: "TESSERA_MAX_RECEIVING_CONNECTIONS",
    key: "maxReceivingConnections",
    fallback: "256",
    help: "Connections still sending their headers or a request body at once (slow or trickling clients); past it the one that started sending first is closed.",
    parse: integer(1, 1_000_000),
  },
  {
    env: "TESSERA_AUTH_FAILURES_PER_MINUTE",
    key: "authFailuresPerMinute",
    fallback: "30",
    help: "Failed authentications (unknown or revoked keys) a client address may make per minute, in bursts of as many; past it, requests from that address with a key not seen valid in the last minute get 429 with retry-after (0: no throttle).",
    parse: integer(0, 1_000_000),
  },
  {
    env: "TESSERA_MAX_HEADER_BYTES",
    key: "maxHeaderBytes",
    fallback: "16384",
    help: "Largest request line plus headers, all header lines together; larger requests get 431.",
    parse: integer(1024, 1_048_576),
  },
  {
    env: "TESSERA_MAX_HEADERS",
    key: "maxHeaders",
    fallback: "100",
    help: "Most header lines in a request; more get 431.",
    parse: integer(8, 10_000),
  },
  {
    env: "TESSERA_MAX_URL_BYTES",
    key: "maxUrlBytes",
    fallback: "8192",
    help: "Longest request target (path and query); longer ones get 414.",
    parse: integer(64, 1_048_576),
  },
  {
    env: "TESSERA_PLAYGROUND",
    key: "playground",
    fallback: "on",
    help: "Serve the playground page (chat with the live denoising view, decisions, models) at / on the HTTP port (on); off: / is 404.",
    parse: (raw) => {
      const value = raw.trim().toLowerCase();
      if (["on", "1", "true", "yes"].includes(value)) return true;
      if (["off", "0", "false", "no"].includes(value)) return false;
      throw new Error("must be on or off");
    },
  },
  {
    env: "TESSERA_CORS_ORIGINS",
    key: "corsOrigins",
    fallback: "",
    help: "Origins a browser may call the API from (CORS), comma-separated (https://app.example.com), or * for any; unset: none.",
    parse: parseCorsOrigins,
  },
  {
    env: "TESSERA_ACCOUNTING_URL",
    key: "accountingUrls",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of accounting, comma-separated replicas tried in turn (http://accounting:8080). Also where `tessera keys` goes when set.",
    parse: urlList,
  },
  {
    env: "TESSERA_REGISTRY_URL",
    key: "registryUrls",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of the registry, comma-separated.",
    parse: urlList,
  },
  {
    env: "TESSERA_DECISION_URL",
    key: "decisionUrls",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of the decision service, comma-separated.",
    parse: urlList,
  },
  {
    env: "TESSERA_ADVERTISE_URL",
    key: "advertiseUrl",
    fallback: undefined,
    help: "Distributed mode: the Connect URL an inference worker announces in its heartbeats (default: http://<TESSERA_HOST or host name>:<port>).",
    parse: (raw) => (raw.trim() === "" ? undefined : baseUrl(raw)),
  },
  {
    env: "TESSERA_ADMIN_TOKEN",
    key: "adminToken",
    fallback: undefined,
    help: "Distributed mode: the bearer token accounting's admin RPCs require (and `tessera keys` sends); unset refuses them.",
    parse: token,
  },
  {
    env: "TESSERA_INTERNAL_TOKEN",
    key: "internalToken",
    fallback: undefined,
    help: "Distributed mode, optional: a bearer token accounting requires on Authenticate/Admit/Settle and gateways send.",
    parse: token,
  },
  {
    env: "TESSERA_NATS_TIMEOUT_MS",
    key: "natsTimeoutMs",
    fallback: "2000",
    help: "Distributed mode: how long one JetStream request may take; while NATS is away requests fail with 503 at once.",
    parse: integer(100, 60_000),
  },
  {
    env: "TESSERA_NATS_REPLICAS",
    key: "natsReplicas",
    fallback: "1",
    help: "Distributed mode: replicas of the JetStream KV buckets and usage stream (3 on a NATS cluster).",
    parse: integer(1, 5),
  },
  {
    env: "TESSERA_USAGE_ACK_WAIT_MS",
    key: "usageAckWaitMs",
    fallback: "30000",
    help: "Distributed mode: a usage event not acknowledged within this time (its accounting replica died) is redelivered.",
    parse: integer(1_000, 3_600_000),
  },
  {
    env: "TESSERA_GATEWAY_SWEEP_INTERVAL_MS",
    key: "gatewaySweepIntervalMs",
    fallback: "10000",
    help: "Distributed mode: how often each accounting replica looks for requests of gateways that died (no heartbeat for 10 s, seen twice in a row): their streams are charged what they had delivered and their holds released.",
    parse: integer(500, 3_600_000),
  },
];
