import type { Server, IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionLimits {
  /** Connections open at once on the port. */
  maxConnections: number;
  /** Connections open at once from one client address. */
  maxPerAddress: number;
  /** A connection that has sent no byte this long after it opened is closed. 0: never. */
  firstByteTimeoutMs: number;
  /**
   * Connections still sending their first request's headers or a request's body, at once;
   * past it the oldest of them is closed. Default: no budget.
   */
  maxReceiving?: number;
}

export interface ConnectionEvents {
  /** An idle connection was closed to make room for a new one (`cap`: which limit). */
  evicted?(cap: "total" | "address"): void;
  /** A new connection was refused: at the limit with no idle connection to close. */
  refused?(cap: "total" | "address"): void;
  /** A connection was closed for sending nothing within the first-byte timeout. */
  silent?(): void;
  /** The oldest connection still sending headers or a body was closed: too many were sending. */
  receiving?(): void;
}

interface Tracked {
  socket: Socket;
  address: string;
  /** Requests on it whose response has not finished. */
  inFlight: number;
}

/**
 * Connection caps as proxies (envoy, nginx) keep them, so that idle sockets cannot lock
 * clients out: at the total cap, or at the cap of one client address, the new connection is
 * accepted and an idle connection (no request in flight; of that address for the address cap)
 * is closed instead — the oldest that never sent a byte, else the oldest idle one; only when every connection is busy is the new one refused.
 * A connection that sends no byte within `firstByteTimeoutMs` is closed (apart from, and
 * shorter than, the headers timeout). Connections still sending — from opening until their
 * first request's headers are in, and from a request with a body until its body is in — are
 * kept to `maxReceiving`: past it the one that started sending first is closed, so a flood of
 * trickling headers or bodies holds a bounded number of sockets and no request that arrives
 * whole waits for a place. Replaces node:http's `maxConnections`, which refuses new
 * connections while idle ones hold every place.
 */
export function governConnections(server: Server, limits: ConnectionLimits, events: ConnectionEvents = {}): void {
  // Insertion order = age: the first entry is the oldest connection.
  const open = new Map<Socket, Tracked>();
  const byAddress = new Map<string, Set<Tracked>>();
  // Sockets still sending headers or a body, oldest first.
  const receiving = new Set<Socket>();
  const maxReceiving = limits.maxReceiving ?? Number.POSITIVE_INFINITY;
  const startReceiving = (socket: Socket) => {
    receiving.add(socket);
    for (const oldest of receiving) {
      if (receiving.size <= maxReceiving) break;
      receiving.delete(oldest);
      events.receiving?.();
      oldest.destroy();
    }
  };

  /** The connection to close for a new one: the oldest that never sent a byte, else the oldest idle one. */
  const oldestIdle = (among: Iterable<Tracked>): Tracked | undefined => {
    let idle: Tracked | undefined;
    for (const t of among) {
      if (t.inFlight > 0) continue;
      if (t.socket.bytesRead === 0) return t;
      idle ??= t;
    }
    return idle;
  };

  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    let mine = byAddress.get(address);
    if (mine !== undefined && mine.size >= limits.maxPerAddress) {
      const victim = oldestIdle(mine);
      if (victim === undefined) {
        events.refused?.("address");
        socket.destroy();
        return;
      }
      events.evicted?.("address");
      forget(victim);
      victim.socket.destroy();
    }
    if (open.size >= limits.maxConnections) {
      const victim = oldestIdle(open.values());
      if (victim === undefined) {
        events.refused?.("total");
        socket.destroy();
        return;
      }
      events.evicted?.("total");
      forget(victim);
      victim.socket.destroy();
    }
    const tracked: Tracked = { socket, address, inFlight: 0 };
    open.set(socket, tracked);
    if (mine === undefined) {
      mine = new Set();
      byAddress.set(address, mine);
    }
    mine.add(tracked);
    socket.once("close", () => {
      receiving.delete(socket);
      forget(tracked);
    });
    startReceiving(socket);
    if (limits.firstByteTimeoutMs > 0) {
      const timer = setTimeout(() => {
        if (socket.bytesRead === 0 && !socket.destroyed) {
          events.silent?.();
          socket.destroy();
        }
      }, limits.firstByteTimeoutMs);
      timer.unref();
      socket.once("close", () => clearTimeout(timer));
    }
  });

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as Socket;
    // The headers are in; a body still to come keeps the socket sending until it is.
    receiving.delete(socket);
    if (hasBody(req) && !req.complete) {
      startReceiving(socket);
      const received = () => receiving.delete(socket);
      req.once("end", received);
      req.once("close", received);
      res.once("close", received);
    }
    const tracked = open.get(socket);
    if (tracked === undefined) return;
    tracked.inFlight++;
    // Busy connections move to the end: the oldest idle one is the least recently used.
    open.delete(tracked.socket);
    open.set(tracked.socket, tracked);
    res.once("close", () => {
      tracked.inFlight = Math.max(0, tracked.inFlight - 1);
    });
  };
  // Before the route handler, so that a request counts as in flight from its first moment.
  server.prependListener("request", onRequest);
  server.prependListener("checkContinue", onRequest);

  function forget(tracked: Tracked): void {
    if (open.get(tracked.socket) !== tracked) return;
    open.delete(tracked.socket);
    const mine = byAddress.get(tracked.address);
    mine?.delete(tracked);
    if (mine?.size === 0) byAddress.delete(tracked.address);
  }
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}
