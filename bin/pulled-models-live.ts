import { existsSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "../lib/logger.js";
import type { ModelPool } from "../services/inference/engine/model-pool.js";
import type { Catalog } from "../services/registry/catalog.js";
import { configCatalog, listPulled, type PulledManifest, withPulled } from "../services/registry/pulled.js";

export const PULLED_SCAN_INTERVAL_MS = 5_000;
/** The data directory's manifests are read at most this often, whatever asks. */
const MIN_READ_GAP_MS = 1_000;

/**
 * What `tessera serve` serves, models pulled while it runs included (as `ollama pull` next to
 * `ollama serve`): the models config and the data directory's pulled models at start, then every
 * new manifest of the data directory, found every few seconds or when a request names a model
 * the catalog lacks. A new model is loaded into the running pool, then listed and answered under
 * its repo id and aliases. A manifest replaced (a new revision) or removed takes effect at the
 * next start: the server says so once, and keeps serving what it loaded.
 */
export class LivePulledCatalog {
  readonly #dataDir: string;
  readonly #config: Catalog | undefined;
  readonly #joined: PulledManifest[];
  #catalog: Catalog;
  /** Repo ids and aliases of models being loaded → the load. */
  readonly #joining = new Map<string, Promise<void>>();
  /** Manifests whose model failed to load (repo, path, pull time): tried again when pulled again. */
  readonly #failed = new Set<string>();
  /** Repo ids and aliases of models that failed to load (the log says why; a reply does not hold server paths). */
  readonly #failedIds = new Set<string>();
  readonly #warned = new Set<string>();
  #readAt = Number.NEGATIVE_INFINITY;
  #follow: Following | undefined;
  #stopped = false;

  constructor(modelsConfig: string, dataDir: string) {
    this.#dataDir = dataDir;
    this.#joined = listPulled(dataDir);
    this.#config = configCatalog(modelsConfig, this.#joined.length > 0);
    this.#catalog = withPulled(this.#config, this.#joined);
  }

  readonly catalog = (): Catalog => this.#catalog;

  /** Serves models pulled from now on in `pool`, announcing each through `beat`. */
  follow(pool: ModelPool, beat: () => void, logger: Logger, intervalMs = PULLED_SCAN_INTERVAL_MS): void {
    const timer = setInterval(() => this.#read(), intervalMs);
    timer.unref();
    this.#follow = { pool, beat, logger, timer };
  }

  /**
   * Reads the manifests again (at most once a second) and waits for the model `id` names if it
   * is one being loaded: a request for a model pulled a moment ago is answered by it, and one
   * for a model that does not exist waits for nothing.
   */
  readonly lookAgain = async (id?: string): Promise<void> => {
    if (Date.now() - this.#readAt >= MIN_READ_GAP_MS) this.#read();
    if (id === undefined) return;
    await this.#joining.get(id);
    if (this.#failedIds.has(id) && this.#catalog.resolve(id) === undefined)
      throw new ConnectError(
        `model "${id}" was pulled but could not be loaded (the server's log says why; pull it again to retry)`,
        Code.Unavailable,
      );
  };

  stop(): void {
    this.#stopped = true;
    if (this.#follow !== undefined) clearInterval(this.#follow.timer);
  }

  #read(): void {
    const follow = this.#follow;
    if (follow === undefined || this.#stopped) return;
    this.#readAt = Date.now();
    let manifests: PulledManifest[];
    try {
      manifests = listPulled(this.#dataDir);
    } catch (err) {
      this.#warnOnce(follow.logger, undefined, `cannot read the pulled models: ${(err as Error).message}`);
      return;
    }
    const joined = new Map(this.#joined.map((m) => [m.repo, m]));
    for (const m of manifests) {
      const served = joined.get(m.repo);
      if (served !== undefined && served.path !== m.path)
        this.#warnOnce(follow.logger, m, `${m.repo} was pulled again (${m.path}); the running server keeps ${served.path} until restart`);
    }
    for (const served of this.#joined) {
      if (!manifests.some((m) => m.repo === served.repo))
        this.#warnOnce(follow.logger, served, `${served.repo} was removed; the running server keeps serving it until restart`);
    }
    const taken = new Set(this.#config?.models.flatMap((m) => [m.id, ...m.aliases]) ?? []);
    for (const m of manifests) {
      if (joined.has(m.repo) || taken.has(m.repo) || this.#failed.has(failureKey(m))) continue;
      if (this.#joining.has(m.repo)) continue;
      for (const id of [m.repo, ...m.aliases]) this.#failedIds.delete(id);
      const load = this.#join(m, follow);
      for (const id of [m.repo, ...m.aliases]) this.#joining.set(id, load);
    }
  }

  async #join(m: PulledManifest, { pool, beat, logger }: Following): Promise<void> {
    try {
      if (!existsSync(m.path)) throw new Error(`model directory ${m.path} not found`);
      await pool.add([{ servingId: m.repo, dir: m.path }]);
      if (this.#stopped) return;
      this.#joined.push(m);
      this.#catalog = withPulled(this.#config, this.#joined);
      beat();
      logger.info({ model: m.repo, aliases: m.aliases, dir: m.path }, "pulled model joined the running server");
    } catch (err) {
      this.#failed.add(failureKey(m));
      for (const id of [m.repo, ...m.aliases]) this.#failedIds.add(id);
      logger.error({ model: m.repo, dir: m.path, err: (err as Error).message }, "pulled model could not be loaded; pull it again to retry");
    } finally {
      for (const id of [m.repo, ...m.aliases]) this.#joining.delete(id);
    }
  }

  #warnOnce(logger: Logger, m: PulledManifest | undefined, message: string): void {
    if (this.#warned.has(message)) return;
    this.#warned.add(message);
    logger.warn(m === undefined ? {} : { model: m.repo }, message);
  }
}

interface Following {
  pool: ModelPool;
  beat: () => void;
  logger: Logger;
  timer: NodeJS.Timeout;
}

const failureKey = (m: PulledManifest) => `${m.repo}\u0000${m.path}\u0000${m.pulledAt}`;
