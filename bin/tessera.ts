#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import { ConfigError, loadConfig, settingInEnvironment, settingsHelp } from "../lib/config.js";
import { createLogger } from "../lib/logger.js";
import { localClient } from "../lib/service-mount.js";
import { openEmbeddedAccounting } from "../services/accounting/embedded.js";
import { KEYS_HELP, runKeysCommand } from "../services/accounting/cli.js";
import { CatalogError } from "../services/registry/catalog.js";
import { bearerInterceptor, serviceTransport } from "../lib/remote/clients.js";
import { runCalibrate } from "./calibrate-command.js";
import { convertPython, runConvert } from "./convert-command.js";
import { PullError } from "../lib/hub/errors.js";
import { hubEnv } from "../lib/hub/env.js";
import { runModels } from "./models-command.js";
import { runPull } from "./pull-command.js";
import { pullForServe, splitServeArgs } from "./serve-model.js";
import { SERVICE_NAMES, startDistributed, type ServiceName } from "./distributed.js";
import { startEmbedded } from "./embedded.js";
import { usePrivateTmpdir } from "./private-tmpdir.js";

export { SERVICE_NAMES };

const USAGE = `Usage:
  tessera serve [${SERVICE_NAMES.join("|")} …]
      Run the services. No names: every service in one process with the embedded store
      (the default). Names: those services in this process, in distributed mode on NATS
      (TESSERA_NATS_URL; the others at TESSERA_ACCOUNTING_URL, TESSERA_REGISTRY_URL,
      TESSERA_DECISION_URL). Pulled models (tessera pull) join the models config's.
  tessera serve --model <org/name>[@revision] [--as NAME] [--weights W] [--block-size N]
      Pull a model from the Hugging Face Hub if needed (as tessera pull), then serve it alone
      under its repo id; /readyz names the phase meanwhile.
  tessera pull <org/name>[@revision] [--as NAME] [--weights int8|int4|fp16|fp32] [--block-size N] [--no-setup]
      Download (into the Hugging Face cache) and convert a model (tessera pull --help).
  tessera models list | rm <org/name|alias>
      The pulled models: id, family, weights, disk use, repo@commit; rm frees their space.
  tessera keys <command> …
      Manage API keys, accounts, limits and usage: through accounting at
      TESSERA_ACCOUNTING_URL with TESSERA_ADMIN_TOKEN when set, else in TESSERA_DATA_DIR
      (tessera keys --help).
  tessera convert <checkpoint-dir> <model-dir> [--block-size N] [--weights int8|fp32|fp16|int4]
      Convert a Hugging Face SDAR, Fast-dLLM v2 or DiffusionGemma checkpoint into a model directory
      (tessera convert --help).
  tessera calibrate <model-dir> <labelled.jsonl> [--holdout F] [--write]
      Fit a model directory's decision temperatures (one per question type) on labelled
      /v1/systemone requests, report NLL, ECE and accuracy before and after, and with --write
      put them into its decision.json (tessera calibrate --help).
  tessera --help

Settings (environment variables):
`;

function serveHelp(): string {
  return `${USAGE}${settingsHelp()}\n`;
}

async function serve(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(serveHelp());
    return 0;
  }
  const { services, pull } = splitServeArgs(args);
  const unknown = services.filter((a) => !(SERVICE_NAMES as readonly string[]).includes(a));
  if (unknown.length > 0) {
    process.stderr.write(`tessera serve: unknown service ${unknown.map((u) => `"${u}"`).join(", ")} (${SERVICE_NAMES.join(", ")})\n`);
    return 2;
  }
  const names = [...new Set(services)] as ServiceName[];
  const config = loadConfig();
  usePrivateTmpdir();
  // Every service named without NATS is the embedded process, as with no names.
  const distributed = names.length > 0 && (names.length < SERVICE_NAMES.length || config.cluster.natsUrl !== undefined);
  if (distributed && config.cluster.natsUrl === undefined) {
    process.stderr.write(
      `tessera serve ${names.join(" ")}: running a subset of the services is distributed mode, which needs TESSERA_NATS_URL (nats://host:4222);\n` +
        "run `tessera serve` without names to run every service in one process.\n",
    );
    return 2;
  }
  if (distributed && pull !== undefined) {
    process.stderr.write("tessera serve --model runs every service in one process; it does not take service names\n");
    return 2;
  }
  const logger = createLogger({ level: config.server.logLevel });
  if (!distributed && config.cluster.natsUrl !== undefined) {
    logger.warn(
      { natsUrl: config.cluster.natsUrl },
      "TESSERA_NATS_URL is set, but `tessera serve` without service names runs the embedded adapters; it is ignored",
    );
  }
  const catalog = pull === undefined ? undefined : await pullForServe(pull, config, logger);
  const app = distributed
    ? await startDistributed({ config, logger, services: names })
    : await startEmbedded({ config, logger, ...(catalog !== undefined ? { catalog } : {}) });

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, "second signal: exiting now");
        logger.flush();
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, "signal received");
      app.close().then(resolve, (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        resolve();
      });
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  logger.flush();
  return 0;
}

async function keys(args: string[]): Promise<number> {
  if (args.length === 0 || args[0] === "--help" || args[0] === "-h") {
    process.stdout.write(
      `${KEYS_HELP}\n\nWith TESSERA_ACCOUNTING_URL set, the commands go to that accounting service (distributed mode),\n` +
        "authenticated with TESSERA_ADMIN_TOKEN; otherwise the keys live in the store under TESSERA_DATA_DIR (default ./data).\n",
    );
    return args.length === 0 ? 2 : 0;
  }
  const config = loadConfig();
  if (config.cluster.accountingUrls.length > 0) {
    const interceptors = config.cluster.adminToken === undefined ? [] : [bearerInterceptor(config.cluster.adminToken)];
    const client = createClient(AccountingService, serviceTransport(config.cluster.accountingUrls, { timeoutMs: 30_000, interceptors }));
    return runKeysCommand(
      args,
      client,
      (line) => process.stdout.write(`${line}\n`),
      (line) => process.stderr.write(`${line}\n`),
    );
  }
  const logger = createLogger({ level: "warn" });
  const accounting = await openEmbeddedAccounting({
    dataDir: config.storage.dataDir,
    logger,
    defaultRequestsPerMinute: config.accounting.defaultRequestsPerMinute,
    serverDefaults: !settingInEnvironment("accounting", "defaultRequestsPerMinute"),
  });
  try {
    const client = localClient(AccountingService, accounting.routes, "router");
    return await runKeysCommand(
      args,
      client,
      (line) => process.stdout.write(`${line}\n`),
      (line) => process.stderr.write(`${line}\n`),
    );
  } finally {
    await accounting.close();
    logger.flush();
  }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "serve":
        return await serve(rest);
      case "keys":
        return await keys(rest);
      case "convert":
        return rest.length === 0 || rest.includes("--help") || rest.includes("-h")
          ? runConvert(rest, "")
          : runConvert(rest, convertPython(loadConfig().hub.convertPython));
      case "calibrate":
        return await runCalibrate(rest);
      case "pull":
        return await runPull(rest, loadConfig());
      case "models":
        return runModels(rest, loadConfig().storage.dataDir, hubEnv(), (line) => process.stdout.write(`${line}\n`));
      case undefined:
      case "--help":
      case "-h":
      case "help":
        process.stdout.write(serveHelp());
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`tessera: unknown command "${command}"\n\n${serveHelp()}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof ConfigError || err instanceof CatalogError || err instanceof PullError) {
      process.stderr.write(`tessera: ${err.message}\n`);
      return 1;
    }
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      process.stderr.write(`tessera: ${(err as Error).message}: the port is taken; set TESSERA_PORT to another one\n`);
      return 1;
    }
    throw err;
  }
}

// Run when executed (also through the npm bin link), not when imported.
const invokedAs = process.argv[1] === undefined ? undefined : realpathSync(process.argv[1]);
if (invokedAs !== undefined && invokedAs === realpathSync(fileURLToPath(import.meta.url))) {
  main(process.argv.slice(2)).then(
    (status) => {
      process.exitCode = status;
    },
    (err: unknown) => {
      process.stderr.write(`tessera: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
