import { integer, parseCorsOrigins } from "../config-parsers.js";
import { section } from "./setting.js";

// The public HTTP port and the gateway behind it.

export const http = section("HTTP port", "The public HTTP listener: timeouts, connection and size caps (slow and hostile clients).", {
  headersTimeoutMs: {
    env: "TESSERA_HEADERS_TIMEOUT_MS",
    fallback: "10000",
    help: "Time a client has to send a request's headers; slower ones get 408 and are cut off (slowloris).",
    parse: integer(100, 600_000),
  },
  requestTimeoutMs: {
    env: "TESSERA_BODY_TIMEOUT_MS",
    fallback: "60000",
    help: "Time a client has to send a whole request, body included (at least the headers timeout); slower ones get 408.",
    parse: integer(100, 3_600_000),
  },
  maxConnections: {
    env: "TESSERA_MAX_CONNECTIONS",
    fallback: "1024",
    help: "Connections open at once on the HTTP port; at the cap the oldest idle connection is closed for a new one (a new one is refused only when all are busy).",
    parse: integer(1, 1_000_000),
  },
  maxConnectionsPerAddress: {
    env: "TESSERA_MAX_CONNECTIONS_PER_ADDRESS",
    fallback: "256",
    help: "Connections open at once from one client address; at the cap that address's oldest idle connection is closed for a new one.",
    parse: integer(1, 1_000_000),
  },
  firstByteTimeoutMs: {
    env: "TESSERA_FIRST_BYTE_TIMEOUT_MS",
    fallback: "5000",
    help: "A connection that sends no byte this long after opening is closed (0: never; the headers timeout still applies).",
    parse: integer(0, 3_600_000),
  },
  maxReceivingConnections: {
    env: "TESSERA_MAX_RECEIVING_CONNECTIONS",
    fallback: "256",
    help: "Connections still sending their headers or a request body at once (slow or trickling clients); past it the one that started sending first is closed.",
    parse: integer(1, 1_000_000),
  },
  maxHeaderBytes: {
    env: "TESSERA_MAX_HEADER_BYTES",
    fallback: "16384",
    help: "Largest request line plus headers, all header lines together; larger requests get 431.",
    parse: integer(1024, 1_048_576),
  },
  maxHeaders: {
    env: "TESSERA_MAX_HEADERS",
    fallback: "100",
    help: "Most header lines in a request; more get 431.",
    parse: integer(8, 10_000),
  },
});

export const gateway = section("Gateway", "What the gateway does with each request: deadlines, throttles, CORS, the playground.", {
  requestDeadlineMs: {
    env: "TESSERA_REQUEST_DEADLINE_MS",
    fallback: "600000",
    help: "A request whose answer has not started after this long gets 504 and its work is cancelled (0: no deadline).",
    parse: integer(0, 86_400_000),
  },
  streamStallTimeoutMs: {
    env: "TESSERA_STREAM_STALL_TIMEOUT_MS",
    fallback: "30000",
    help: "A stream whose client reads nothing for this long is dropped and its generation slot freed.",
    parse: integer(100, 3_600_000),
  },
  authFailuresPerMinute: {
    env: "TESSERA_AUTH_FAILURES_PER_MINUTE",
    fallback: "30",
    help: "Failed authentications (unknown or revoked keys) a client address may make per minute, in bursts of as many; past it, requests from that address with a key not seen valid in the last minute get 429 with retry-after (0: no throttle).",
    parse: integer(0, 1_000_000),
  },
  maxUrlBytes: {
    env: "TESSERA_MAX_URL_BYTES",
    fallback: "8192",
    help: "Longest request target (path and query); longer ones get 414.",
    parse: integer(64, 1_048_576),
  },
  playground: {
    env: "TESSERA_PLAYGROUND",
    fallback: "on",
    help: "Serve the playground page (chat with the live denoising view, decisions, models) at / on the HTTP port (on); off: / is 404.",
    parse: (raw) => {
      const value = raw.trim().toLowerCase();
      if (["on", "1", "true", "yes"].includes(value)) return true;
      if (["off", "0", "false", "no"].includes(value)) return false;
      throw new Error("must be on or off");
    },
  },
  corsOrigins: {
    env: "TESSERA_CORS_ORIGINS",
    fallback: "",
    help: "Origins a browser may call the API from (CORS), comma-separated (https://app.example.com), or * for any; unset: none.",
    parse: parseCorsOrigins,
  },
});
