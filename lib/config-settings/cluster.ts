import { hostname } from "node:os";
import { integer, optional, baseUrl, urlList, token } from "../config-parsers.js";
import { section } from "./setting.js";

// Distributed mode: NATS, the services' URLs and credentials, heartbeats.

export const cluster = section("Distributed mode", "NATS, the services' URLs and credentials, the worker's identity in heartbeats.", {
  natsUrl: {
    env: "TESSERA_NATS_URL",
    fallback: undefined,
    help: "NATS server for distributed mode (nats://host:4222); unset runs the embedded adapters.",
    parse: (raw) => {
      const url = optional(raw);
      if (url !== undefined && !/^(nats|tls|ws|wss):\/\/./.test(url)) throw new Error(`must be a nats:// URL, got "${raw}"`);
      return url;
    },
  },
  workerId: {
    env: "TESSERA_WORKER_ID",
    fallback: `${hostname()}-${process.pid}`,
    documentedDefault: "host-pid",
    help: "Id this process's inference worker announces in its heartbeats (default: host-pid).",
    parse: (raw) => {
      if (!/^[A-Za-z0-9._:-]{1,128}$/.test(raw)) throw new Error("must be 1-128 letters, digits, . _ : -");
      return raw;
    },
  },
  accountingUrls: {
    env: "TESSERA_ACCOUNTING_URL",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of accounting, comma-separated replicas tried in turn (http://accounting:8080). Also where `tessera keys` goes when set.",
    parse: urlList,
  },
  registryUrls: {
    env: "TESSERA_REGISTRY_URL",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of the registry, comma-separated.",
    parse: urlList,
  },
  decisionUrls: {
    env: "TESSERA_DECISION_URL",
    fallback: "",
    help: "Distributed mode: Connect URL(s) of the decision service, comma-separated.",
    parse: urlList,
  },
  advertiseUrl: {
    env: "TESSERA_ADVERTISE_URL",
    fallback: undefined,
    help: "Distributed mode: the Connect URL an inference worker announces in its heartbeats (default: http://<TESSERA_HOST or host name>:<port>).",
    parse: (raw) => (raw.trim() === "" ? undefined : baseUrl(raw)),
  },
  adminToken: {
    env: "TESSERA_ADMIN_TOKEN",
    fallback: undefined,
    help: "Distributed mode: the bearer token accounting's admin RPCs require (and `tessera keys` sends); unset refuses them.",
    parse: token,
  },
  internalToken: {
    env: "TESSERA_INTERNAL_TOKEN",
    fallback: undefined,
    help: "Distributed mode, optional: a bearer token accounting requires on Authenticate/Admit/Settle and gateways send.",
    parse: token,
  },
  natsTimeoutMs: {
    env: "TESSERA_NATS_TIMEOUT_MS",
    fallback: "2000",
    help: "Distributed mode: how long one JetStream request may take; while NATS is away requests fail with 503 at once.",
    parse: integer(100, 60_000),
  },
  natsReplicas: {
    env: "TESSERA_NATS_REPLICAS",
    fallback: "1",
    help: "Distributed mode: replicas of the JetStream KV buckets and usage stream (3 on a NATS cluster).",
    parse: integer(1, 5),
  },
});
