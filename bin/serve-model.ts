import type { Config } from "../lib/config.js";
import { hubEnv } from "../lib/hub/env.js";
import { PullError } from "../lib/hub/errors.js";
import { parseRepoRef } from "../lib/hub/names.js";
import { createPullProgress } from "../lib/hub/progress.js";
import type { Logger } from "../lib/logger.js";
import type { Catalog } from "../services/registry/catalog.js";
import { type PulledManifest, readManifest, withPulled } from "../services/registry/pulled.js";
import { parsePullArgs, pullModel } from "./pull-command.js";
import { startPullStatusServer } from "./pull-status-server.js";

// `tessera serve --model <org/name>[@rev] [--as NAME] [--weights W] [--block-size N] [--no-setup]`:
// pull (a cached revision costs two small requests, none offline), then serve those models.

export interface ServeArgs {
  /** Service names (distributed mode). */
  services: string[];
  /** The --model values and the pull flags; undefined without --model. */
  pull: { refs: string[]; flags: string[] } | undefined;
}

const PULL_FLAGS_WITH_VALUE = new Set(["--as", "--weights", "--block-size"]);

export function splitServeArgs(args: readonly string[]): ServeArgs {
  const services: string[] = [];
  const refs: string[] = [];
  const flags: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--model") {
      const v = args[++i];
      if (v === undefined) throw new PullError("--model needs a Hugging Face model id (org/name[@revision])");
      refs.push(v);
    } else if (PULL_FLAGS_WITH_VALUE.has(a)) {
      const v = args[++i];
      if (v === undefined) throw new PullError(`${a} needs a value`);
      flags.push(a, v);
    } else if (a === "--no-setup") flags.push(a);
    else services.push(a);
  }
  if (refs.length === 0 && flags.length > 0) throw new PullError(`${flags[0]} goes with --model <org/name>`);
  return { services, pull: refs.length === 0 ? undefined : { refs, flags } };
}

/** Pulls each --model (progress on stderr, /readyz answering with the phase on the port meanwhile); the catalog of those models. */
export async function pullForServe(pull: NonNullable<ServeArgs["pull"]>, config: Config, logger: Logger): Promise<Catalog> {
  const env = hubEnv();
  const flags = parsePullArgs(pull.flags);
  let current = () => "starting";
  const status = await startPullStatusServer(config.server.host, config.server.port, () => current());
  logger.info({ url: status.url, models: pull.refs }, "pulling models before serving; /readyz says which phase");
  const manifests: PulledManifest[] = [];
  try {
    for (const text of pull.refs) {
      const ref = parseRepoRef(text);
      const progress = createPullProgress(process.stderr, ref.repo);
      current = () => progress.status();
      try {
        const { manifest } = await pullModel({
          ref,
          env,
          dataDir: config.storage.dataDir,
          python: config.hub.convertPython,
          progress,
          ...(flags.aliases !== undefined ? { aliases: flags.aliases } : {}),
          ...(flags.weights !== undefined ? { weights: flags.weights } : {}),
          ...(flags.blockSize !== undefined ? { blockSize: flags.blockSize } : {}),
          ...(flags.noSetup ? { noSetup: true } : {}),
        });
        manifests.push(manifest);
      } catch (err) {
        // The Hub unreachable (not a refusal): a model pulled before is served as it is.
        const before = readManifest(config.storage.dataDir, ref.repo);
        if (err instanceof PullError || before === undefined) throw err;
        logger.warn(
          { repo: ref.repo, commit: before.commit, err: (err as Error).message },
          "the Hub is unreachable; serving the revision pulled before",
        );
        manifests.push(before);
      }
    }
  } finally {
    await status.close();
  }
  return withPulled(undefined, manifests);
}
