import type { Server } from "node:http";
import type { Logger } from "../lib/logger.js";

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * Stops accepting; idle keep-alive connections close at once, busy ones once their request
 * is answered; whatever is still running after the grace period is cut off (which aborts
 * its handlers through their signals).
 */
export async function drain(server: Server, graceMs: number, logger: Logger): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => resolve("expired"), graceMs);
  });
  try {
    if ((await Promise.race([closed, expired])) === "expired") {
      logger.warn({ graceMs }, "requests still running after the grace period; cancelling them");
      server.closeAllConnections();
      await closed;
    }
  } finally {
    clearInterval(sweep);
    clearTimeout(timer);
  }
}
