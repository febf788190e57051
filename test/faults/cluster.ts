import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createClient, type Client } from "@connectrpc/connect";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { bearerInterceptor, serviceTransport } from "../../lib/remote/clients.js";
import { REPO_ROOT, TINY_MODEL_DIR, writeModelsConfig } from "../helpers/tessera.js";
import { startNatsServer, type NatsServerHandle } from "../nats/nats-server.js";

/** One `tessera serve <services>` process of the cluster. */
export interface TesseraProcess {
  name: string;
  url: string;
  pid: number;
  /** Its log lines (pino JSON) and anything else it printed, last 2 000. */
  output: string[];
  exited: Promise<number | null>;
  alive(): boolean;
  /** SIGKILL: no shutdown, no flush, connections cut by the kernel. */
  kill9(): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
}

export interface Cluster {
  nats: NatsServerHandle;
  gateways: TesseraProcess[];
  accounting: TesseraProcess[];
  inference: TesseraProcess[];
  registry: TesseraProcess;
  decision: TesseraProcess;
  /** TESSERA_BOOTSTRAP_KEY of the cluster. */
  key: string;
  adminToken: string;
  /** Accounting's admin RPCs over Connect, with the admin token, failing over between the replicas. */
  admin: Client<typeof AccountingService>;
  all(): TesseraProcess[];
  /** The last lines of every process, for a failed test's message. */
  logs(lines?: number): string;
  close(): Promise<void>;
}

export interface ClusterOptions {
  /** Settings for every process. */
  env?: Record<string, string>;
  /** Settings of the inference workers. */
  inferenceEnv?: Record<string, string>;
}

/** Ports free right now on 127.0.0.1 (held together while picked, so they differ). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Server>((resolve) => {
          const server = createServer();
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Spawns `node --import tsx bin/tessera.ts serve <services>` and waits for its "tessera listening" line. */
export async function spawnTessera(name: string, services: string[], env: Record<string, string>): Promise<TesseraProcess> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "bin/tessera.ts", "serve", ...services], {
    cwd: REPO_ROOT,
    env: { ...process.env, TESSERA_HOST: "127.0.0.1", TESSERA_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const keep = (line: string) => {
    output.push(line);
    if (output.length > 2_000) output.splice(0, output.length - 2_000);
  };
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  createInterface({ input: child.stderr! }).on("line", keep);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 60 s:\n${output.slice(-40).join("\n")}`)), 60_000);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      keep(line);
      if (line.includes('"tessera listening"')) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { url: string }).url);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before listening:\n${output.slice(-40).join("\n")}`));
    });
  });
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    await exited;
  };
  const alive = () => child.exitCode === null && child.signalCode === null;
  return { name, url, pid: child.pid!, output, exited, alive, kill9: () => signal("SIGKILL"), stop: () => signal("SIGTERM") };
}

/**
 * The fault tests' cluster, all on loopback with free ports: a real nats-server with
 * JetStream, two accounting replicas, a registry, two inference workers on the tiny test
 * model, a decision service and two gateways, each its own process.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-faults-"));
  const key = `tsr_${randomBytes(32).toString("base64url")}`;
  const adminToken = randomBytes(24).toString("hex");
  const nats = await startNatsServer();
  const started: TesseraProcess[] = [];
  const base: Record<string, string> = {
    TESSERA_NATS_URL: nats.url,
    TESSERA_MODELS_CONFIG: writeModelsConfig(scratch, TINY_MODEL_DIR),
    TESSERA_DATA_DIR: join(scratch, "data"),
    TESSERA_LOG_LEVEL: "info",
    TESSERA_SHUTDOWN_TIMEOUT_MS: "2000",
    ...options.env,
  };
  const spawnOne = async (name: string, services: string[], env: Record<string, string>) => {
    const proc = await spawnTessera(name, services, { ...base, ...env });
    started.push(proc);
    return proc;
  };
  const close = async () => {
    await Promise.all(started.map((p) => p.stop()));
    await nats.dispose();
    rmSync(scratch, { recursive: true, force: true });
  };

  try {
    // Ports picked up front, so that every process starts at once knowing the others' URLs.
    const [pAcc1, pAcc2, pReg, pDec] = await freePorts(4);
    const urlOf = (port: number) => `http://127.0.0.1:${port}`;
    const accountingUrls = `${urlOf(pAcc1!)},${urlOf(pAcc2!)}`;
    const accountingEnv = { TESSERA_ADMIN_TOKEN: adminToken, TESSERA_BOOTSTRAP_KEY: key };
    const inferenceEnv = { TESSERA_INTRA_OP_THREADS: "1", ...options.inferenceEnv };
    const gatewayEnv = { TESSERA_ACCOUNTING_URL: accountingUrls, TESSERA_REGISTRY_URL: urlOf(pReg!), TESSERA_DECISION_URL: urlOf(pDec!) };
    const [acc1, acc2, registry, infA, infB, decision, gw1, gw2] = await Promise.all([
      spawnOne("accounting-1", ["accounting"], { ...accountingEnv, TESSERA_PORT: String(pAcc1) }),
      spawnOne("accounting-2", ["accounting"], { ...accountingEnv, TESSERA_PORT: String(pAcc2) }),
      spawnOne("registry", ["registry"], { TESSERA_PORT: String(pReg) }),
      spawnOne("inference-a", ["inference"], { ...inferenceEnv, TESSERA_WORKER_ID: "inf-a" }),
      spawnOne("inference-b", ["inference"], { ...inferenceEnv, TESSERA_WORKER_ID: "inf-b" }),
      spawnOne("decision", ["decision"], { TESSERA_PORT: String(pDec), TESSERA_REGISTRY_URL: urlOf(pReg!) }),
      spawnOne("gateway-1", ["gateway"], gatewayEnv),
      spawnOne("gateway-2", ["gateway"], gatewayEnv),
    ]);
    const admin = createClient(
      AccountingService,
      serviceTransport([acc1!.url, acc2!.url], { timeoutMs: 10_000, interceptors: [bearerInterceptor(adminToken)] }),
    );
    return {
      nats,
      gateways: [gw1!, gw2!],
      accounting: [acc1!, acc2!],
      inference: [infA!, infB!],
      registry: registry!,
      decision: decision!,
      key,
      adminToken,
      admin,
      all: () => [...started],
      logs: (lines = 30) => started.map((p) => `--- ${p.name}\n${p.output.slice(-lines).join("\n")}`).join("\n"),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
