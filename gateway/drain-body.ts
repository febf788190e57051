import type { IncomingMessage, ServerResponse } from "node:http";

/** After an oversized body is refused, how much more of it is read and thrown away before the connection is cut. */
const DISCARD_BYTES = 16 * 1024 * 1024;
const DISCARD_MS = 2_000;

/**
 * A body left unread (refused before or while reading it) is read and thrown away so the
 * connection stays usable and the client receives the answer instead of a reset; a client
 * that keeps sending past a bound is cut off.
 */
export function discardBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || req.readableEnded) return;
  let discarded = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, DISCARD_MS);
  timer.unref();
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_BYTES) {
      clearTimeout(timer);
      res.once("finish", cut);
      if (res.writableFinished) cut();
    }
  });
  req.once("end", () => clearTimeout(timer));
  req.once("close", () => clearTimeout(timer));
  req.resume();
}
