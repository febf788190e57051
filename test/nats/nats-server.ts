import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll } from "vitest";
import { ensureUsageStream } from "../../lib/nats/usage-stream.js";

export interface NatsServerHandle {
  url: string;
  port: number;
  /** Stops the server (SIGTERM); its JetStream data stays, so `start()` brings it back. */
  stop(): Promise<void>;
  /** Starts it again on the same port and storage directory. */
  start(): Promise<void>;
  /** Stops it and deletes its storage. */
  dispose(): Promise<void>;
}

const NATS_BIN = process.env.TESSERA_TEST_NATS_SERVER ?? "nats-server";

/**
 * A real nats-server with JetStream on 127.0.0.1 and a free port (`-p -1`), storage in a
 * temporary directory. The port is read from the server's log line.
 */
export async function startNatsServer(): Promise<NatsServerHandle> {
  const storeDir = mkdtempSync(join(tmpdir(), "tessera-nats-"));
  let child: ChildProcess | null = null;
  let port = -1;

  const launch = async (wantedPort: number) => {
    const proc = spawn(NATS_BIN, ["-a", "127.0.0.1", "-p", String(wantedPort), "-js", "-sd", storeDir], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = proc;
    port = await new Promise<number>((resolve, reject) => {
      let log = "";
      const timer = setTimeout(() => reject(new Error(`nats-server did not start:\n${log}`)), 10_000);
      const onData = (chunk: Buffer) => {
        log += chunk.toString();
        const listening = /Listening for client connections on [^\s]*:(\d+)/.exec(log);
        if (listening && /Server is ready/.test(log)) {
          clearTimeout(timer);
          resolve(Number(listening[1]));
        }
      };
      proc.stdout?.on("data", onData);
      proc.stderr?.on("data", onData);
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited with ${code}:\n${log}`));
      });
      proc.once("error", reject);
    });
  };

  const stop = async () => {
    const proc = child as ChildProcess | null;
    child = null;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGTERM");
    });
  };

  await launch(-1);
  return {
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    stop,
    start: () => launch(port),
    async dispose() {
      await stop();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

export interface NatsForTests {
  server: NatsServerHandle;
  nc: NatsConnection;
}

/**
 * A real nats-server and a connection to it for the suite: started before its tests (with
 * the usage stream when asked), drained and removed after them.
 */
export function useNats(options: { usageStream?: boolean } = {}): NatsForTests {
  const nats = {} as NatsForTests;
  beforeAll(async () => {
    nats.server = await startNatsServer();
    nats.nc = await connect({ servers: nats.server.url });
    if (options.usageStream) await ensureUsageStream(nats.nc);
  });
  afterAll(async () => {
    await nats.nc?.drain();
    await nats.server?.dispose();
  });
  return nats;
}
