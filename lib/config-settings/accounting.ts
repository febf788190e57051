import { integer } from "../config-parsers.js";
import { section } from "./setting.js";

// Accounting: keys, rate limits, usage.

export const accounting = section("Accounting", "Keys, rate limits and usage.", {
  bootstrapKey: {
    env: "TESSERA_BOOTSTRAP_KEY",
    fallback: undefined,
    help: "An API key (tsr_...) that must exist and be active; no key is generated when it is set.",
    parse: (raw) => {
      const key = raw.trim();
      if (key === "") return undefined;
      if (!/^tsr_[A-Za-z0-9_-]{16,}$/.test(key)) throw new Error("must look like tsr_ followed by at least 16 letters, digits, - or _");
      return key;
    },
  },
  defaultRequestsPerMinute: {
    env: "TESSERA_DEFAULT_RPM",
    fallback: "60",
    help: "Requests per minute allowed per key unless the key has its own limit.",
    parse: integer(1, 1_000_000_000),
  },
  usageAckWaitMs: {
    env: "TESSERA_USAGE_ACK_WAIT_MS",
    fallback: "30000",
    help: "Distributed mode: a usage event not acknowledged within this time (its accounting replica died) is redelivered.",
    parse: integer(1_000, 3_600_000),
  },
  gatewaySweepIntervalMs: {
    env: "TESSERA_GATEWAY_SWEEP_INTERVAL_MS",
    fallback: "10000",
    help: "Distributed mode: how often each accounting replica looks for requests of gateways that died (no heartbeat for 10 s, seen twice in a row): their streams are charged what they had delivered and their holds released.",
    parse: integer(500, 3_600_000),
  },
});
