import { pino, type DestinationStream, type Logger as PinoLogger } from "pino";

export type Logger = PinoLogger;

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

// A safety net for secrets passed to a log call by mistake (nothing logs them on purpose).
// Only fixed paths: wildcard paths make every log call markedly slower.
const REDACTED_PATHS = ["authorization", "apiKey", "api_key", "headers.authorization", "req.headers.authorization"];

export interface LoggerOptions {
  level?: LogLevel;
  /** Where JSON lines go; stdout when omitted. Tests pass a stream to read them back. */
  destination?: DestinationStream;
}

/** One JSON line per event (pino), with secrets redacted. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? "info",
      base: { pid: process.pid },
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A logger that drops everything, for tests and tools that only want the return values. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
