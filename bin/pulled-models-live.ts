import { existsSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "../lib/logger.js";
import type { ModelPool } from "../services/inference/engine/model-pool.js";
import type { Catalog } from "../services/registry/catalog.js";
import { configCatalog, idsTakenBy, listPulled, type PulledManifest, withPulled } from "../services/registry/pulled.js";

export const PULLED_SCAN_INTERVAL_MS = 5_000;
/** The data directory's manifests are read at most this often, whatever asks. */
const MIN_READ_GAP_MS = 1_000;

/**
 * What `tessera serve` serves, models pulled while it runs included (as `ollama pull` next to
 * `ollama serve`): the models config and the data directory's pulled models at start, then every
 * new manifest of the data directory, found every few seconds or when a request names a model
 * the catalog lacks. A new model is loaded into the running pool, then listed and answered under
 * its repo id and aliases. A model pulled again at a new revision is loaded beside the one served,
 * which answers until then; a removed one stops taking requests. Either way the replies the
 * previous engine runs finish before it closes.
 */
export class LivePulledCatalog {
  readonly #dataDir: string;
  readonly #config: Catalog | undefined;
  /** Ids and aliases of the models config: a pulled model under one of them is not served. */
  readonly #takenByConfig: Set<string>;
  readonly #joined: PulledManifest[];
  #catalog: Catalog;
  /** Repo ids and aliases of models being loaded → the load. */
  readonly #joining = new Map<string, Promise<void>>();
  /** Manifests whose model failed to load (repo, path, pull time): tried again when pulled again. */
  readonly #failed = new Set<string>();
  /** Repo ids and aliases of models that failed to load (the log says why; a reply does not hold server paths). */
  readonly #failedIds = new Set<string>();
  readonly #warned = new Set<string>();
  /** Repo ids being loaded (new or a new revision). */
  readonly #busy = new Set<string>();
  #readAt = Number.NEGATIVE_INFINITY;
  #follow: Following | undefined;
  #stopped = false;

  constructor(modelsConfig: string, dataDir: string) {
    this.#dataDir = dataDir;
    this.#joined = listPulled(dataDir);
    this.#config = configCatalog(modelsConfig, this.#joined.length > 0);
    this.#takenByConfig = idsTakenBy(this.#config);
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

  /** Runs from a timer and from requests: whatever goes wrong is logged, never thrown. */
  #read(): void {
    const follow = this.#follow;
    if (follow === undefined || this.#stopped) return;
    this.#readAt = Date.now();
    try {
      this.#apply(listPulled(this.#dataDir), follow);
    } catch (err) {
      this.#warnOnce(follow.logger, `following the pulled models failed: ${(err as Error).message}`);
    }
  }

  /** Starts loading the models of new manifests and the new revisions of served ones; stops serving removed ones. */
  #apply(manifests: PulledManifest[], follow: Following): void {
    const now = new Map(manifests.map((m) => [m.repo, m]));
    for (const served of [...this.#joined]) {
      if (this.#busy.has(served.repo) || this.#catalog.resolve(served.repo)?.model.modelDir !== served.path) continue;
      const next = now.get(served.repo);
      if (next === undefined) this.#remove(served, follow);
      else if (next.path !== served.path && !this.#failed.has(failureKey(next))) void this.#load(next, follow, served);
    }
    const joined = new Set(this.#joined.map((m) => m.repo));
    for (const m of manifests) {
      if (joined.has(m.repo) || this.#takenByConfig.has(m.repo) || this.#busy.has(m.repo) || this.#failed.has(failureKey(m))) continue;
      for (const id of [m.repo, ...m.aliases]) this.#failedIds.delete(id);
      const load = this.#load(m, follow);
      for (const id of [m.repo, ...m.aliases]) this.#joining.set(id, load);
    }
  }

  /** Loads a new pulled model, or (`replacing`) the new revision of one served, which keeps answering meanwhile. */
  async #load(m: PulledManifest, { pool, beat, logger }: Following, replacing?: PulledManifest): Promise<void> {
    this.#busy.add(m.repo);
    try {
      if (!existsSync(m.path)) throw new Error(`model directory ${m.path} not found`);
      const model = [{ servingId: m.repo, dir: m.path }];
      await (replacing === undefined ? pool.add(model) : pool.replace(model));
      if (this.#stopped) return;
      this.#setJoined([...this.#joined.filter((j) => j.repo !== m.repo), m]);
      beat();
      if (replacing === undefined)
        logger.info({ model: m.repo, aliases: m.aliases, dir: m.path }, "pulled model joined the running server");
      else
        logger.info(
          { model: m.repo, dir: m.path, previous: replacing.path },
          "pulled model's new revision serves new requests; the previous one finishes what it runs",
        );
    } catch (err) {
      this.#failed.add(failureKey(m));
      if (replacing === undefined) for (const id of [m.repo, ...m.aliases]) this.#failedIds.add(id);
      logger.error({ model: m.repo, dir: m.path, err: (err as Error).message }, "pulled model could not be loaded; pull it again to retry");
    } finally {
      this.#busy.delete(m.repo);
      if (replacing === undefined) for (const id of [m.repo, ...m.aliases]) this.#joining.delete(id);
    }
  }

  /** A pulled model removed (`tessera models rm`): no new request reaches it; what it runs finishes. */
  #remove(m: PulledManifest, { pool, beat, logger }: Following): void {
    this.#setJoined(this.#joined.filter((j) => j.repo !== m.repo));
    pool.remove([m.repo]);
    beat();
    logger.info({ model: m.repo, dir: m.path }, "pulled model removed from the running server; it finishes what it runs");
  }

  #setJoined(joined: PulledManifest[]): void {
    this.#joined.splice(0, this.#joined.length, ...joined);
    this.#catalog = withPulled(this.#config, this.#joined);
  }

  #warnOnce(logger: Logger, message: string): void {
    if (this.#warned.has(message)) return;
    this.#warned.add(message);
    logger.warn(message);
  }
}

interface Following {
  pool: ModelPool;
  beat: () => void;
  logger: Logger;
  timer: NodeJS.Timeout;
}

const failureKey = (m: PulledManifest) => `${m.repo}\u0000${m.path}\u0000${m.pulledAt}`;
